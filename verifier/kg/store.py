"""The local KG store (Postgres) as a KGBackend: name lookup, profiles, ranked edges and short paths.

Queries work on integer row ids and join labels only for what is returned; paths are found inside
Postgres (verifier/kg/pathsearch.py).
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import connection
from django.db.models import Count
from django.db.models.functions import Lower

from verifier.kg import pathsearch
from verifier.kg.base import Candidate, Edge, EntityProfile, KGPath, PathStep, Ref, RelationProfile, ends
from verifier.memory import encoder
from verifier.models import Entity, EntityType, KnowledgeGraph, Passage, Relation

TRIPLE = "verifier_triple"
# Fuzzy (trigram) matches below this similarity are not candidates.
MIN_TRIGRAM_SIMILARITY = 0.4
MIN_EMBEDDING_SIMILARITY = 0.3

_RawEdge = tuple[int, int, int]  # (head row id, relation row id, tail row id)


class PostgresKG:
    """A KGBackend over one KnowledgeGraph of the local store."""

    def __init__(self, kg: KnowledgeGraph):
        self.kg = kg
        self.name = kg.name

    @property
    def version(self) -> str:
        # The row id and load time too: a KG deleted and loaded again under the same name starts at
        # version 1 again, and must not be answered from the old graph's cache entries.
        loaded = int(self.kg.loaded_at.timestamp()) if self.kg.loaded_at else 0
        return f"local:{self.kg.name}#{self.kg.pk}:v{self.kg.version}@{loaded}"

    # ---------------------------------------------------------------------------------- names

    def find_entities(self, text: str, *, limit: int = 5) -> list[Candidate]:
        text = text.strip()
        if not text:
            return []
        entities = Entity.objects.filter(kg=self.kg)
        by_id = list(entities.filter(external_id=text)[:1])
        if by_id:
            return [_candidate(by_id[0], "id", 1.0)]
        exact = list(entities.annotate(l=Lower("label")).filter(l=text.lower())[: limit + 1])
        alias = list(entities.filter(aliases__overlap=list({text, text.lower(), text.title()}))[: limit + 1])
        found = [_candidate(e, "exact", 1.0) for e in exact]
        found += [_candidate(e, "alias", 0.95) for e in alias if e.pk not in {x.pk for x in exact}]
        if found:
            return found[:limit]
        fuzzy = self.similar_entities(text, limit=limit)
        if fuzzy:
            return fuzzy
        return self._by_passage_embedding(text, limit)

    def similar_entities(self, text: str, *, limit: int) -> list[Candidate]:
        """Typos and partial names: trigram word similarity ("Einstien" finds "Albert Einstein")."""
        with connection.cursor() as cursor:
            cursor.execute("SELECT set_config('pg_trgm.word_similarity_threshold', %s, false)", [str(MIN_TRIGRAM_SIMILARITY)])
            cursor.execute(
                # Score: mean of word similarity (partial names) and whole-label similarity (prefers
                # "United Kingdom" over "United Kingdom of Great Britain and Ireland" for "Unitd Kingdm").
                """SELECT id, (word_similarity(lower(%s), lower(label)) + similarity(lower(%s), lower(label))) / 2 AS score
                FROM verifier_entity WHERE kg_id = %s AND lower(%s) <%% lower(label)
                ORDER BY score DESC, id LIMIT %s""",
                [text, text, self.kg.pk, text, limit],
            )
            scores = dict(cursor.fetchall())
        entities = Entity.objects.in_bulk(list(scores))
        return [_candidate(entities[pk], "fuzzy", round(score, 3)) for pk, score in scores.items()]

    def _by_passage_embedding(self, text: str, limit: int) -> list[Candidate]:
        """Last resort: the entities whose passage is closest in meaning to the name."""
        from pgvector.django import CosineDistance

        if not Passage.objects.filter(kg=self.kg, embedding__isnull=False).exists():
            return []
        nearest = (
            Passage.objects.filter(kg=self.kg, embedding__isnull=False)
            .annotate(distance=CosineDistance("embedding", encoder.encode_one(text)))
            .select_related("entity")
            .order_by("distance")[:limit]
        )
        return [
            _candidate(p.entity, "embedding", round(1 - p.distance, 3))
            for p in nearest
            if 1 - p.distance >= MIN_EMBEDDING_SIMILARITY
        ]

    def find_relations(self, text: str, *, limit: int = 5) -> list[Candidate]:
        text = text.strip()
        relations = list(Relation.objects.filter(kg=self.kg))
        lowered = text.lower()
        found = [_candidate(r, "id", 1.0) for r in relations if r.external_id == text]
        found += [_candidate(r, "exact", 1.0) for r in relations if r.label.lower() == lowered and r.external_id != text]
        found += [_candidate(r, "alias", 0.95) for r in relations if lowered in {a.lower() for a in r.aliases}]
        if found:
            return found[:limit]
        # Relations are few (tens to hundreds): rank them all by meaning.
        with_vectors = [r for r in relations if r.embedding is not None]
        if not with_vectors or not text:
            return []
        query = encoder.encode_one(text)
        scored = sorted(((float(query @ r.embedding), r) for r in with_vectors), key=lambda x: -x[0])
        return [_candidate(r, "embedding", round(s, 3)) for s, r in scored[:limit] if s >= MIN_EMBEDDING_SIMILARITY]

    # ---------------------------------------------------------------------------------- profiles

    def entity(self, entity_id: str) -> EntityProfile | None:
        entity = Entity.objects.filter(kg=self.kg, external_id=entity_id).first()
        if entity is None:
            return None
        return EntityProfile(
            id=entity.external_id,
            label=entity.label,
            description=entity.description,
            aliases=list(entity.aliases),
            types=self._type_refs(entity.types),
        )

    def relation(self, relation_id: str) -> RelationProfile | None:
        relation = Relation.objects.filter(kg=self.kg, external_id=relation_id).first()
        if relation is None:
            return None
        return RelationProfile(
            id=relation.external_id,
            label=relation.label,
            description=relation.description,
            aliases=list(relation.aliases),
            domain=self._type_refs(relation.domain),
            range=self._type_refs(relation.range),
            schema_source=relation.schema_source,
        )

    def _type_refs(self, ids: list[str]) -> list[Ref]:
        labels = dict(EntityType.objects.filter(kg=self.kg, external_id__in=ids).values_list("external_id", "label"))
        return [Ref(t, labels.get(t, "")) for t in ids]

    # ---------------------------------------------------------------------------------- edges

    def _row_id(self, model, external_id: str) -> int | None:
        return model.objects.filter(kg=self.kg, external_id=external_id).values_list("pk", flat=True).first()

    def edges(self, entity_id: str, *, limit: int = 500) -> list[Edge]:
        return self.ranked_edges(entity_id, None, limit=limit)

    def ranked_edges(self, entity_id: str, relation_id: str | None, *, limit: int = 20,
                     exclude: frozenset[tuple[str, str, str]] = frozenset()) -> list[Edge]:
        """The entity's edges (both directions) ordered by cosine similarity between their relation and
        ``relation_id``'s label embedding, computed by pgvector in the same query."""
        with connection.cursor() as cursor:
            # One round trip: ids resolved and labels joined in the same statement. Rank the entity's
            # distinct relations first, then read at most n edges per relation in
            # rank order from the (head, relation) and covering (tail, relation) indexes: a hub with
            # 30,000 edges costs a few hundred index probes, not a sort of all its edges.
            cursor.execute(
                f"""WITH target AS (SELECT id FROM verifier_entity WHERE kg_id = %(kg)s AND external_id = %(entity)s),
                    rels AS (
                      SELECT DISTINCT relation_id FROM (
                        SELECT relation_id FROM {TRIPLE} WHERE head_id = (SELECT id FROM target)
                        UNION ALL
                        SELECT relation_id FROM {TRIPLE} WHERE tail_id = (SELECT id FROM target)) used),
                    ranked AS (
                      SELECT r.id, row_number() OVER (
                        ORDER BY r.embedding <=> (SELECT embedding FROM verifier_relation
                                                  WHERE kg_id = %(kg)s AND external_id = %(q)s) NULLS LAST, r.id
                      ) AS rank
                      FROM verifier_relation r WHERE r.id IN (SELECT relation_id FROM rels))
                    SELECT h.external_id, h.label, r.external_id, r.label, t.external_id, t.label FROM (
                    SELECT e.h, e.r, e.t, ranked.rank FROM ranked CROSS JOIN LATERAL (
                      (SELECT head_id AS h, relation_id AS r, tail_id AS t FROM {TRIPLE}
                        WHERE head_id = (SELECT id FROM target) AND relation_id = ranked.id ORDER BY tail_id LIMIT %(n)s)
                      UNION ALL
                      (SELECT head_id, relation_id, tail_id FROM {TRIPLE}
                        WHERE tail_id = (SELECT id FROM target) AND relation_id = ranked.id
                          AND head_id <> (SELECT id FROM target) ORDER BY head_id LIMIT %(n)s)
                    ) e ORDER BY ranked.rank, e.h, e.t LIMIT %(n)s) top
                    JOIN verifier_entity h ON h.id = top.h
                    JOIN verifier_relation r ON r.id = top.r
                    JOIN verifier_entity t ON t.id = top.t
                    ORDER BY top.rank, top.h, top.t""",
                {"kg": self.kg.pk, "entity": entity_id, "q": relation_id, "n": limit + len(exclude)},
            )
            rows = cursor.fetchall()
        edges = [Edge(Ref(h, hl), Ref(r, rl), Ref(t, tl)) for h, hl, r, rl, t, tl in rows]
        return self._marked([e for e in edges if e.ids not in exclude][:limit])

    def _edges(self, raw: Iterable[_RawEdge]) -> list[Edge]:
        raw = list(raw)
        entity_ids = {h for h, _, _ in raw} | {t for _, _, t in raw}
        relation_ids = {r for _, r, _ in raw}
        entities = {pk: Ref(ext, label) for pk, ext, label in
                    Entity.objects.filter(pk__in=entity_ids).values_list("pk", "external_id", "label")}
        relations = {pk: Ref(ext, label) for pk, ext, label in
                     Relation.objects.filter(pk__in=relation_ids).values_list("pk", "external_id", "label")}
        return self._marked([Edge(entities[h], relations[r], entities[t]) for h, r, t in raw])

    def _marked(self, edges: list[Edge]) -> list[Edge]:
        """The edges with every end whose label another entity of the KG carries marked as shared."""
        shared = shared_labels(self.kg.pk, (ref.label for ref in ends(edges)))
        if not shared:
            return edges
        return [edge.marked(shared) for edge in edges]

    # ---------------------------------------------------------------------------------- paths

    def paths(self, source_id: str, target_id: str, *, max_hops: int = 3, limit: int = 20,
              exclude: frozenset[tuple[str, str, str]] = frozenset()) -> list[KGPath]:
        source, target = self._row_id(Entity, source_id), self._row_id(Entity, target_id)
        if source is None or target is None or source == target:
            return []
        with connection.cursor() as cursor:
            found = pathsearch.find_paths(cursor, source, target, max_hops=min(max_hops, 3), limit=limit,
                                          excluded=self._excluded_rows(exclude))
        return self._to_paths(found)

    def _excluded_rows(self, exclude: frozenset[tuple[str, str, str]]) -> set[_RawEdge]:
        if not exclude:
            return set()
        entities = dict(Entity.objects.filter(kg=self.kg, external_id__in={x for h, _, t in exclude for x in (h, t)})
                        .values_list("external_id", "pk"))
        relations = dict(Relation.objects.filter(kg=self.kg, external_id__in={r for _, r, _ in exclude})
                         .values_list("external_id", "pk"))
        return {
            (entities[h], relations[r], entities[t])
            for h, r, t in exclude
            if h in entities and r in relations and t in entities
        }

    def _to_paths(self, raw_paths: list[list[tuple[_RawEdge, bool]]]) -> list[KGPath]:
        edges = dict(zip(
            (e for path in raw_paths for e, _ in path),
            self._edges(e for path in raw_paths for e, _ in path),
            strict=True,
        ))
        return [KGPath(tuple(PathStep(edges[e], forward) for e, forward in path)) for path in raw_paths]


def shared_labels(kg_id: int, labels: Iterable[str]) -> set[str]:
    """Those of ``labels`` that more than one entity of the KG carries (ignoring case): where such a label is
    written, only the id tells its entities apart."""
    labels = {label for label in labels if label}
    if not labels:
        return set()
    found = set(Entity.objects.filter(kg_id=kg_id).annotate(lowered=Lower("label"))
                .filter(lowered__in={label.lower() for label in labels})
                .values("lowered").annotate(n=Count("id")).filter(n__gt=1).values_list("lowered", flat=True))
    return {label for label in labels if label.lower() in found}


def _candidate(obj, match, score: float) -> Candidate:
    return Candidate(id=obj.external_id, label=obj.label, description=obj.description, match=match, score=score)
