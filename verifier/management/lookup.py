"""What the management commands share: finding the KG or the evaluation a command names."""

from __future__ import annotations

from django.core.management.base import CommandError

from verifier.models import Evaluation, KnowledgeGraph


def kg_named(name: str, *, loaded: bool = False) -> KnowledgeGraph:
    """The KG of that name, or a CommandError listing the known ones (``loaded``: it must hold triples)."""
    kg = KnowledgeGraph.objects.filter(name=name).first()
    if kg is None or (loaded and kg.version == 0):
        known = ", ".join(KnowledgeGraph.objects.exclude(version=0).values_list("name", flat=True)) or "none loaded"
        raise CommandError(f"no loaded KG named {name!r} (known: {known}; load one with manage.py load_kg)")
    return kg


def find_evaluation(key: str) -> Evaluation:
    """The evaluation of that id or name, or a CommandError saying where the evaluations are listed."""
    evaluation = Evaluation.objects.filter(pk=int(key)).first() if key.isdigit() else Evaluation.objects.filter(name=key).first()
    if evaluation is None:
        raise CommandError(f"no evaluation {key!r} (give its id or name; see /evaluations/)")
    return evaluation
