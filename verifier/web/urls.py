"""Workbench page routes; each area module owns its own paths."""

from verifier.web import (
    claims,
    confidence,
    entities,
    guide,
    kg_audits,
    kg_changes,
    memory,
    onboarding,
    queue,
    reviewers,
    runs,
    saved_views,
    structure,
    webhooks,
)

urlpatterns = [*queue.urlpatterns, *saved_views.urlpatterns, *runs.urlpatterns, *memory.urlpatterns, *structure.urlpatterns,
               *webhooks.urlpatterns, *entities.urlpatterns,
               *reviewers.urlpatterns, *confidence.urlpatterns, *claims.urlpatterns, *kg_changes.urlpatterns,
               *kg_audits.urlpatterns, *onboarding.urlpatterns, *guide.urlpatterns]
