"""Workbench pages: runs."""

urlpatterns: list = []
