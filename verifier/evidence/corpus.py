"""The local text corpus (entity passages in Postgres) with hybrid retrieval.

Retrieval is lexical first (Postgres full-text search, ``ts_rank_cd`` over the English tsvector), then
a dense re-rank with the stored all-MiniLM-L6-v2 embeddings:
``score = α · lexical / max(lexical) + (1 − α) · cosine``. When no passage matches lexically, the
nearest passages by meaning (HNSW) are returned instead.
"""

from __future__ import annotations

import re

import numpy as np
from django.contrib.postgres.search import SearchQuery, SearchRank
from pgvector.django import CosineDistance

from verifier.evidence.base import TextPassage
from verifier.memory import encoder
from verifier.models import KnowledgeGraph, Passage

LEXICAL_CANDIDATES = 50
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


class PostgresCorpus:
    def __init__(self, kg: KnowledgeGraph, *, source_label: str = "wikipedia (local corpus)"):
        self.kg = kg
        self.source_label = source_label

    def _passage(self, row: Passage, score: float = 0.0) -> TextPassage:
        return TextPassage(title=row.entity.label or row.entity.external_id, text=row.text, url=row.url,
                           source=self.source_label, entity_id=row.entity.external_id, score=score)

    def entity_passages(self, entity_id: str) -> list[TextPassage]:
        rows = Passage.objects.filter(kg=self.kg, entity__external_id=entity_id).select_related("entity").order_by("pk")
        return [self._passage(row) for row in rows]

    def search(self, query: str, *, limit: int = 5, alpha: float = 0.5) -> list[TextPassage]:
        if not query.strip():
            return []
        terms = SearchQuery(query, search_type="websearch", config="english")
        lexical = list(
            Passage.objects.filter(kg=self.kg, search_vector=terms)
            .annotate(rank=SearchRank("search_vector", terms, cover_density=True))
            .select_related("entity")
            .order_by("-rank")[:LEXICAL_CANDIDATES]
        )
        vector = encoder.encode_one(query)
        if not lexical:
            nearest = (
                Passage.objects.filter(kg=self.kg, embedding__isnull=False)
                .annotate(distance=CosineDistance("embedding", vector))
                .select_related("entity")
                .order_by("distance")[:limit]
            )
            return [self._passage(p, round(1 - p.distance, 4)) for p in nearest]
        top_rank = max(p.rank for p in lexical) or 1.0
        scored = []
        for row in lexical:
            cosine = float(np.asarray(row.embedding) @ vector) if row.embedding is not None else 0.0
            scored.append((alpha * row.rank / top_rank + (1 - alpha) * cosine, row))
        scored.sort(key=lambda pair: -pair[0])
        return [self._passage(row, round(score, 4)) for score, row in scored[:limit]]
