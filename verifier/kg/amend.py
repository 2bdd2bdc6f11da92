"""Triples removed from and added to a local KG in one transaction, as a load does it: the entities' degrees and the
derived relation schema follow, and the KG's version moves on (tool results are cached per version, and the
structural model of the old version no longer scores the new one: the caller requests its retraining)."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from verifier.errors import ApplicationError
from verifier.kg.loader import derive_relation_schema, update_degrees
from verifier.models import KnowledgeGraph, Triple

Key = tuple[int, int, int]  # head, relation and tail row ids


class NotLocal(ApplicationError):
    """A remote KG's triples live in its own store."""


@dataclass(frozen=True)
class Amended:
    removed: int  # triples the KG stated and no longer does
    added: int  # triples it lacked and now states
    version: int  # the KG's version after the change (unchanged when nothing changed)


def amend(kg: KnowledgeGraph, *, remove: list[Key] = (), add: list[Key] = ()) -> Amended:
    """Remove ``remove`` and add ``add`` (row ids of the KG's own entities and relations). A triple already absent
    or already present changes nothing; when nothing changes the version stays."""
    if kg.kind != KnowledgeGraph.Kind.LOCAL:
        raise NotLocal(f"{kg.name} is a remote KG: change it in its own store (the KG changes export as a SPARQL Update)")
    with transaction.atomic(), connection.cursor() as cursor:
        kg = KnowledgeGraph.objects.select_for_update().get(pk=kg.pk)
        removed = 0
        if remove:
            wanted = Q()
            for head, relation, tail in remove:
                wanted |= Q(head_id=head, relation_id=relation, tail_id=tail)
            removed, _ = Triple.objects.filter(wanted, kg=kg).delete()
        present = set(Triple.objects.filter(kg=kg, head_id__in={h for h, _, _ in add})
                      .values_list("head_id", "relation_id", "tail_id")) if add else set()
        new = [key for key in dict.fromkeys(add) if key not in present]
        Triple.objects.bulk_create([Triple(kg=kg, head_id=h, relation_id=r, tail_id=t) for h, r, t in new])
        if removed or new:
            update_degrees(cursor, kg)
            derive_relation_schema(cursor, kg)
            KnowledgeGraph.objects.filter(pk=kg.pk).update(version=F("version") + 1, loaded_at=timezone.now())
            kg.refresh_from_db()
    return Amended(removed, len(new), kg.version)
