"""Workbench page routes; each area module owns its own paths."""

from verifier.web import memory, queue, runs, structure, webhooks

urlpatterns = [*queue.urlpatterns, *runs.urlpatterns, *memory.urlpatterns, *structure.urlpatterns, *webhooks.urlpatterns]
