"""Workbench pages: memory."""

urlpatterns: list = []
