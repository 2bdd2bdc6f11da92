"""The local KG store (Postgres) as a KGBackend: name lookup, profiles, ranked edges and short paths.

Queries work on integer row ids and join labels only for what is returned. Paths are found by a
bidirectional search of at most three hops done in three set-based queries (the neighbourhoods of both
ends, then the edges between them), with hubs pruned as middle nodes so one "United States" cannot
flood the search.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from django.db import connection
from django.db.models.functions import Lower

from verifier.kg.base import Candidate, Edge, EntityProfile, KGPath, PathStep, Ref, RelationProfile
from verifier.memory import encoder
from verifier.models import Entity, EntityType, KnowledgeGraph, Passage, Relation

TRIPLE = "verifier_triple"
# Middle nodes of a path with more edges than this are not expanded (they may still be met from
# both sides as the middle of a 2-hop path).
HUB_DEGREE = 2000
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
        return f"local:{self.kg.name}:v{self.kg.version}"

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
        fuzzy = self._trigram(text, limit)
        if fuzzy:
            return fuzzy
        return self._by_passage_embedding(text, limit)

    def _trigram(self, text: str, limit: int) -> list[Candidate]:
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
        entity = self._row_id(Entity, entity_id)
        if entity is None:
            return []
        query_relation = self._row_id(Relation, relation_id) if relation_id else None
        with connection.cursor() as cursor:
            cursor.execute(
                f"""SELECT t.head_id, t.relation_id, t.tail_id FROM (
                      SELECT head_id, relation_id, tail_id FROM {TRIPLE} WHERE head_id = %(e)s
                      UNION ALL
                      SELECT head_id, relation_id, tail_id FROM {TRIPLE} WHERE tail_id = %(e)s AND head_id <> %(e)s
                    ) t JOIN verifier_relation r ON r.id = t.relation_id
                    ORDER BY r.embedding <=> (SELECT embedding FROM verifier_relation WHERE id = %(q)s) NULLS LAST,
                             t.relation_id, t.head_id, t.tail_id
                    LIMIT %(n)s""",
                {"e": entity, "q": query_relation, "n": limit + len(exclude)},
            )
            raw = cursor.fetchall()
        edges = [e for e in self._edges(raw) if e.ids not in exclude]
        return edges[:limit]

    def degree(self, entity_id: str) -> int:
        entity = self._row_id(Entity, entity_id)
        if entity is None:
            return 0
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT (SELECT count(*) FROM {TRIPLE} WHERE head_id = %s) + (SELECT count(*) FROM {TRIPLE} WHERE tail_id = %s)",
                [entity, entity],
            )
            return cursor.fetchone()[0]

    def _edges(self, raw: Iterable[_RawEdge]) -> list[Edge]:
        raw = list(raw)
        entity_ids = {h for h, _, _ in raw} | {t for _, _, t in raw}
        relation_ids = {r for _, r, _ in raw}
        entities = {pk: Ref(ext, label) for pk, ext, label in
                    Entity.objects.filter(pk__in=entity_ids).values_list("pk", "external_id", "label")}
        relations = {pk: Ref(ext, label) for pk, ext, label in
                     Relation.objects.filter(pk__in=relation_ids).values_list("pk", "external_id", "label")}
        return [Edge(entities[h], relations[r], entities[t]) for h, r, t in raw]

    # ---------------------------------------------------------------------------------- paths

    def paths(self, source_id: str, target_id: str, *, max_hops: int = 3, limit: int = 20,
              exclude: frozenset[tuple[str, str, str]] = frozenset()) -> list[KGPath]:
        source, target = self._row_id(Entity, source_id), self._row_id(Entity, target_id)
        if source is None or target is None or source == target:
            return []
        excluded = self._excluded_rows(exclude)
        with connection.cursor() as cursor:
            around_source = _incident(cursor, [source], excluded)
            around_target = _incident(cursor, [target], excluded) if max_hops >= 2 else {}
            found: list[list[tuple[_RawEdge, bool]]] = []
            # 1 hop: source — target.
            found += [[(e, fwd)] for e, fwd, other in around_source.get(source, []) if other == target]
            # 2 hops: source — x — target.
            if max_hops >= 2:
                via_target = _by_other(around_target.get(target, []))
                for e1, fwd1, x in around_source.get(source, []):
                    if x == target:
                        continue
                    for e2, fwd2_from_target in via_target.get(x, []):
                        found.append([(e1, fwd1), (e2, not fwd2_from_target)])
            # 3 hops: source — x — y — target, through non-hub middles.
            if max_hops >= 3 and len(found) < limit:
                found += self._three_hops(cursor, source, target, around_source, around_target, excluded, limit)
        ranked = sorted(found, key=len)[:limit]
        return self._to_paths(ranked)

    def _three_hops(self, cursor, source, target, around_source, around_target, excluded, limit):
        firsts = _by_other([(e, f, o) for e, f, o in around_source.get(source, []) if o != target])
        lasts = _by_other([(e, f, o) for e, f, o in around_target.get(target, []) if o != source])
        middles_a = _not_hubs(cursor, list(firsts))
        middles_b = _not_hubs(cursor, list(lasts))
        if not middles_a or not middles_b:
            return []
        cursor.execute(
            f"""SELECT head_id, relation_id, tail_id FROM {TRIPLE}
                WHERE head_id = ANY(%(a)s) AND tail_id = ANY(%(b)s)
                UNION
                SELECT head_id, relation_id, tail_id FROM {TRIPLE}
                WHERE head_id = ANY(%(b)s) AND tail_id = ANY(%(a)s)
                LIMIT %(cap)s""",
            {"a": middles_a, "b": middles_b, "cap": limit * 50},
        )
        found = []
        for middle in cursor.fetchall():
            if middle in excluded:
                continue
            head, _, tail = middle
            for x, y, forward in ((head, tail, True), (tail, head, False)):
                if x in firsts and y in lasts and x != y:
                    for e1, fwd1 in firsts[x][:3]:
                        for e3, fwd3_from_target in lasts[y][:3]:
                            found.append([(e1, fwd1), (middle, forward), (e3, not fwd3_from_target)])
        return found

    def _excluded_rows(self, exclude: frozenset[tuple[str, str, str]]) -> set[_RawEdge]:
        rows = set()
        for head, relation, tail in exclude:
            ids = (self._row_id(Entity, head), self._row_id(Relation, relation), self._row_id(Entity, tail))
            if None not in ids:
                rows.add(ids)
        return rows

    def _to_paths(self, raw_paths: list[list[tuple[_RawEdge, bool]]]) -> list[KGPath]:
        edges = dict(zip(
            (e for path in raw_paths for e, _ in path),
            self._edges(e for path in raw_paths for e, _ in path),
            strict=True,
        ))
        return [KGPath(tuple(PathStep(edges[e], forward) for e, forward in path)) for path in raw_paths]


def _incident(cursor, nodes: list[int], excluded: set[_RawEdge]) -> dict[int, list[tuple[_RawEdge, bool, int]]]:
    """For each node: its edges as (edge, walked forward from the node, the other end)."""
    cursor.execute(
        f"""SELECT head_id, relation_id, tail_id FROM {TRIPLE} WHERE head_id = ANY(%(n)s)
            UNION ALL
            SELECT head_id, relation_id, tail_id FROM {TRIPLE} WHERE tail_id = ANY(%(n)s)""",
        {"n": nodes},
    )
    result: dict[int, list] = defaultdict(list)
    wanted = set(nodes)
    for edge in cursor.fetchall():
        if edge in excluded:
            continue
        head, _, tail = edge
        if head in wanted:
            result[head].append((edge, True, tail))
        if tail in wanted and tail != head:
            result[tail].append((edge, False, head))
    return result


def _by_other(incident: list[tuple[_RawEdge, bool, int]]) -> dict[int, list[tuple[_RawEdge, bool]]]:
    grouped: dict[int, list] = defaultdict(list)
    for edge, forward, other in incident:
        grouped[other].append((edge, forward))
    return grouped


def _not_hubs(cursor, nodes: list[int]) -> list[int]:
    """Nodes with at most HUB_DEGREE edges (degree pruning for the middle of 3-hop paths)."""
    if not nodes:
        return []
    cursor.execute(
        f"""SELECT n FROM unnest(%(n)s::bigint[]) AS n
            WHERE (SELECT count(*) FROM (SELECT 1 FROM {TRIPLE} WHERE head_id = n LIMIT %(cap)s) a)
                + (SELECT count(*) FROM (SELECT 1 FROM {TRIPLE} WHERE tail_id = n LIMIT %(cap)s) b) <= %(cap)s""",
        {"n": nodes, "cap": HUB_DEGREE},
    )
    return [row[0] for row in cursor.fetchall()]


def _candidate(obj, match, score: float) -> Candidate:
    return Candidate(id=obj.external_id, label=obj.label, description=obj.description, match=match, score=score)
