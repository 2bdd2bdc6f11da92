"""What a triple's two ends are called: the embedding of each entity's "label, description", for the audit's
``name_similarity`` — the ends of a real fact are nearly always about related things (a breed and its species, a
film and its director's country), where a random or replaced triple joins two unrelated ones.

Entities are embedded once (all-MiniLM-L6-v2, the encoder the memory bank uses) and kept on the row; the loader
resets a vector when its entity's label or description changes. An entity whose label is only its id and which has
no description has no name to compare, and a KG with more named entities than ``MAX_NAMED`` is audited without
names (embedding them would take longer than the rest of the audit).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from django.db.models import F, Q

from verifier.memory import encoder
from verifier.models import Entity, KnowledgeGraph

MAX_NAMED = 250_000
BATCH = 2048


def named(kg: KnowledgeGraph):
    """The KG's entities that have a name: a description, or a label other than the id."""
    return Entity.objects.filter(kg=kg).filter(Q(description__gt="") | (Q(label__gt="") & ~Q(label=F("external_id"))))


def text_of(label: str, description: str) -> str:
    return f"{label}, {description}" if description else label


def embed_names(kg: KnowledgeGraph, *, report: Callable[[int, int], None] | None = None) -> int:
    """Embed the named entities that have no vector yet (none when the KG has more than MAX_NAMED named ones);
    ``report(done, total)`` after each batch. Returns how many were embedded."""
    if named(kg).count() > MAX_NAMED:
        return 0
    missing = list(named(kg).filter(embedding__isnull=True).only("pk", "label", "description"))
    for start in range(0, len(missing), BATCH):
        batch = missing[start:start + BATCH]
        for entity, vector in zip(batch, encoder.encode([text_of(e.label, e.description) for e in batch]), strict=True):
            entity.embedding = vector
        Entity.objects.bulk_update(batch, ["embedding"], batch_size=1000)
        if report:
            report(start + len(batch), len(missing))
    return len(missing)


def name_vectors(kg: KnowledgeGraph, entity_rows: np.ndarray) -> np.ndarray | None:
    """Unit vectors (float16) of the entities ``entity_rows`` (ascending row ids), a row of NaN for an entity without
    one; None when no entity of the KG has one."""
    stored = Entity.objects.filter(kg=kg, embedding__isnull=False).values_list("pk", "embedding")
    out = None
    for pk, vector in stored.iterator(chunk_size=5000):
        if out is None:
            out = np.full((len(entity_rows), encoder.DIMENSIONS), np.nan, dtype=np.float16)
        at = np.searchsorted(entity_rows, pk)
        if at < len(entity_rows) and entity_rows[at] == pk:
            out[at] = np.asarray(vector, dtype=np.float16)
    return out
