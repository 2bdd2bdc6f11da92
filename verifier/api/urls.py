"""The REST API under /api/ (docs/reference/api.md). URL names are part of the contract with the pages and clients."""

from django.urls import path, re_path
from rest_framework.routers import DefaultRouter

from verifier.api import claims, confidence, kg_audits, kgs, onboardings, views, webhooks

app_name = "api"



class _Router(DefaultRouter):
    """GET /api/ lists the resources (DRF's root view); no ``.json`` suffix routes."""

    include_format_suffixes = False


router = _Router()
router.register("kgs", kgs.KnowledgeGraphViewSet, basename="kg")
router.register("tasks", views.TaskViewSet, basename="task")
router.register("runs", views.RunViewSet, basename="run")
router.register("memory", views.MemoryViewSet, basename="memory")
router.register("evaluations", views.EvaluationViewSet, basename="evaluation")
router.register("audit", views.AuditEventViewSet, basename="audit")
router.register("webhooks", webhooks.WebhookViewSet, basename="webhook")
router.register("claims", claims.ClaimViewSet, basename="claim")
router.register("confidence-models", confidence.ConfidenceModelViewSet, basename="confidence-model")
router.register("kg-audits", kg_audits.KGAuditViewSet, basename="kg-audit")
router.register("onboardings", onboardings.OnboardingViewSet, basename="onboarding")

urlpatterns = [
    *router.urls,
    path("export/<str:fmt>/", views.ExportView.as_view(), name="export"),
    path("kg-audits/<int:pk>/suspects.csv", kg_audits.KGAuditCSVView.as_view(), name="kg-audit-csv"),
    path("schema/", views.SchemaView.as_view(), name="schema"),
    path("docs/", views.DocsView.as_view(url_name="api:schema"), name="docs"),
    re_path(r"^.*/$", views.NotFoundView.as_view(), name="not-found"),
]
