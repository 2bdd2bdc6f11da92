from django.urls import include, path

from verifier import views

urlpatterns = [
    path("health/", views.health, name="health"),
    path("health/status/", views.workbench_status, name="workbench-status"),
    path("api/", include("verifier.api.urls")),
    path("evaluations/", include("verifier.web.evaluations")),
    path("", include("verifier.web.urls")),
]
