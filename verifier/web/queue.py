"""Workbench pages: queue."""

from django.urls import path

from verifier import views

urlpatterns = [path("", views.home, name="home")]
