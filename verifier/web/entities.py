"""Entity look-up: find an entity of a KG by id, label, alias or a misspelt name, with its description and the
flagged triples it takes part in (linked to the queue)."""

from __future__ import annotations

from urllib.parse import urlencode

from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path, reverse
from django.views.decorators.http import require_GET

from verifier.kg.store import PostgresKG
from verifier.models import Entity, KnowledgeGraph, VerificationTask
from verifier.roles import VIEWER, role_required

RESULTS = 10


@require_GET
@role_required(VIEWER)
def entity_lookup(request: HttpRequest) -> HttpResponse:
    graphs = list(KnowledgeGraph.objects.filter(kind=KnowledgeGraph.Kind.LOCAL, version__gt=0).order_by("name"))
    chosen = request.GET.get("kg", "")
    kg = next((g for g in graphs if str(g.pk) == chosen), graphs[0] if graphs else None)
    text = request.GET.get("q", "").strip()[:200]
    found = []
    if kg is not None and text:
        candidates = PostgresKG(kg).find_entities(text, limit=RESULTS)
        entities = {e.external_id: e for e in Entity.objects.filter(kg=kg, external_id__in=[c.id for c in candidates])}
        for candidate in candidates:
            entity = entities.get(candidate.id)
            if entity is None:
                continue
            tasks = VerificationTask.objects.filter(Q(head=entity) | Q(tail=entity)).count()
            found.append({"entity": entity, "match": candidate.match, "score": candidate.score, "tasks": tasks,
                          "queue_href": f"{reverse('queue')}?{urlencode({'q': entity.external_id, 'origin': 'all'})}"})
    return render(request, "verifier/entities.html", {"graphs": graphs, "kg": kg, "q": text, "found": found})


urlpatterns = [path("entities/", entity_lookup, name="entity-lookup")]
