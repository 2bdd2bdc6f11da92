"""What the management commands share: finding the KG a command names."""

from __future__ import annotations

from django.core.management.base import CommandError

from verifier.models import KnowledgeGraph


def kg_named(name: str, *, loaded: bool = False) -> KnowledgeGraph:
    """The KG of that name, or a CommandError listing the known ones (``loaded``: it must hold triples)."""
    kg = KnowledgeGraph.objects.filter(name=name).first()
    if kg is None or (loaded and kg.version == 0):
        known = ", ".join(KnowledgeGraph.objects.exclude(version=0).values_list("name", flat=True)) or "none loaded"
        raise CommandError(f"no loaded KG named {name!r} (known: {known}; load one with manage.py load_kg)")
    return kg
