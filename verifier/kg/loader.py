"""Bulk loading of a KGSource into the local store: COPY into staging tables, then set-based upserts.

The whole import is one transaction: a malformed line, a bad reference or an interrupted load leaves
the store exactly as it was. Loading the same files twice changes nothing (every insert is an upsert on
the natural keys), and passages whose text did not change keep their embeddings. A load that changes no
triple keeps what was learnt from the triples (structural models, mined rules) for the new version.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone
from tqdm import tqdm

from verifier.errors import ApplicationError
from verifier.kg.sources import KGSource, Problem
from verifier.memory import encoder
from verifier.models import (
    Entity,
    EntityType,
    KnowledgeGraph,
    MemoryEntry,
    MinedRule,
    Passage,
    Relation,
    StructuralModel,
    Triple,
)

logger = logging.getLogger(__name__)

MAX_PROBLEMS_SHOWN = 20


class ImportRejected(ApplicationError):
    """The source has malformed lines; nothing was written. ``problems`` lists every one."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        shown = "\n".join(f"  {p}" for p in problems[:MAX_PROBLEMS_SHOWN])
        more = len(problems) - MAX_PROBLEMS_SHOWN
        suffix = f"\n  … and {more} more" if more > 0 else ""
        super().__init__(f"{len(problems)} malformed line(s); nothing was imported:\n{shown}{suffix}")


@dataclass
class LoadReport:
    kg: KnowledgeGraph
    counts: dict[str, int] = field(default_factory=dict)
    added: dict[str, int] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    embedded_passages: int = 0
    facts_changed: bool = True  # False: the same triples as before, so the structural model and rules carried over

    def summary(self) -> str:
        parts = [f"{name}: {self.counts[name]:,} (+{self.added.get(name, 0):,})" for name in self.counts]
        return f"{self.kg.name} v{self.kg.version} — " + ", ".join(parts)


def _table(model) -> str:
    return model._meta.db_table


def _vector_text(vector) -> str:
    return "[" + ",".join(f"{x:.7g}" for x in vector) + "]"


class _Stopwatch:
    def __init__(self, report: LoadReport):
        self.report = report

    def __call__(self, stage: str):
        watch = self

        class _Stage:
            def __enter__(self):
                self.started = time.perf_counter()

            def __exit__(self, *exc):
                watch.report.timings[stage] = round(time.perf_counter() - self.started, 3)

        return _Stage()


def _copy(cursor, table: str, columns: str, rows: Iterable[tuple]) -> int:
    count = 0
    with cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)
            count += 1
    return count


def _stage(cursor, name: str, columns: str) -> None:
    # ON COMMIT DROP cleans up after a top-level load; the DROP covers loads nested in an outer
    # transaction (a test, a bigger service call), where the commit has not happened yet.
    cursor.execute(f"DROP TABLE IF EXISTS {name}")
    cursor.execute(f"CREATE TEMP TABLE {name} ({columns}) ON COMMIT DROP")


def _digest(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()  # noqa: S324 - change detection, not security


def _passages_to_embed(kg: KnowledgeGraph | None, source: KGSource) -> set[tuple[str, str]]:
    """(entity id, source) of passages that are new or whose text changed since the last load."""
    stored: dict[tuple[str, str], str] = {}
    if kg is not None:
        rows = Passage.objects.filter(kg=kg, embedding__isnull=False).values_list(
            "entity__external_id", "source", "text"
        )
        stored = {(ext, src): _digest(text) for ext, src, text in rows.iterator()}
    return {(p.entity_id, p.source) for p in source.passages if stored.get((p.entity_id, p.source)) != _digest(p.text)}


def _embed_passages(kg, source: KGSource, *, batch_size: int, progress: bool) -> dict[tuple[str, str], str]:
    wanted = _passages_to_embed(kg, source)
    todo = [p for p in source.passages if (p.entity_id, p.source) in wanted]
    if not todo:
        return {}
    vectors = encoder.encode([p.text for p in todo], batch_size=batch_size, progress=progress)
    return {(p.entity_id, p.source): _vector_text(v) for p, v in zip(todo, vectors, strict=True)}


def _with_progress(rows: Iterator, *, progress: bool, desc: str, unit: str) -> Iterator:
    return tqdm(rows, desc=desc, unit=unit, unit_scale=True, disable=not progress, mininterval=0.5)


def load_source(
    source: KGSource,
    *,
    replace: bool = False,
    embed: bool = True,
    progress: bool = False,
    batch_size: int = 64,
    log: Callable[[str], None] = logger.info,
) -> LoadReport:
    """Load ``source`` into the local store under ``source.name``; see the module docstring."""
    kg = KnowledgeGraph.objects.filter(name=source.name).first()
    report = LoadReport(kg=kg)  # type: ignore[arg-type]
    timed = _Stopwatch(report)

    # Embeddings are computed before the transaction opens: minutes of CPU must not hold locks.
    vectors: dict[tuple[str, str], str] = {}
    if embed and source.passages:
        with timed("embed passages"):
            log(f"Embedding passages with {encoder.MODEL_NAME} (new or changed text only)…")
            vectors = _embed_passages(kg, source, batch_size=batch_size, progress=progress)
            report.embedded_passages = len(vectors)

    with transaction.atomic(), connection.cursor() as cursor:
        kg, _ = KnowledgeGraph.objects.select_for_update().get_or_create(
            name=source.name, defaults={"title": source.title, "description": source.description}
        )
        report.kg = kg
        before = _counts(kg)
        facts_before = _facts(cursor, kg)
        if replace:
            Triple.objects.filter(kg=kg).delete()

        with timed("types"):
            _stage(cursor, "stage_types", "external_id text, label text, description text")
            _copy(cursor, "stage_types", "external_id, label, description",
                  ((t.external_id, t.label, t.description) for t in source.types))
            cursor.execute(
                f"""INSERT INTO {_table(EntityType)} (kg_id, external_id, label, description)
                SELECT DISTINCT ON (external_id) %s, external_id, label, description FROM stage_types
                ON CONFLICT (kg_id, external_id) DO UPDATE
                SET label = EXCLUDED.label, description = EXCLUDED.description""",
                [kg.pk],
            )

        with timed("entities"):
            _stage(cursor, "stage_entities",
                   "external_id text, label text, description text, aliases text[], types text[], same_as text")
            _copy(cursor, "stage_entities", "external_id, label, description, aliases, types, same_as",
                  ((e.external_id, e.label, e.description, e.aliases, e.types, e.same_as) for e in source.entities))
            cursor.execute(
                f"""INSERT INTO {_table(Entity)} (kg_id, external_id, label, description, aliases, types, same_as)
                SELECT DISTINCT ON (external_id) %s, external_id, label, description, aliases, types, same_as
                FROM stage_entities
                ON CONFLICT (kg_id, external_id) DO UPDATE
                SET label = EXCLUDED.label, description = EXCLUDED.description,
                    aliases = EXCLUDED.aliases, types = EXCLUDED.types, same_as = EXCLUDED.same_as,
                    embedding = CASE WHEN {_table(Entity)}.label = EXCLUDED.label
                                      AND {_table(Entity)}.description = EXCLUDED.description
                                     THEN {_table(Entity)}.embedding END""",
                [kg.pk],
            )

        with timed("relations"):
            _stage(cursor, "stage_relations", "external_id text, label text, description text, aliases text[]")
            _copy(cursor, "stage_relations", "external_id, label, description, aliases",
                  ((r.external_id, r.label, r.description, r.aliases) for r in source.relations))
            # A renamed relation keeps its memories: retrieval prefers the claim's relation by its label.
            cursor.execute(
                f"""UPDATE {_table(MemoryEntry)} m SET relation_label = s.label
                FROM {_table(Relation)} r JOIN stage_relations s ON s.external_id = r.external_id
                WHERE r.kg_id = %s AND m.kg_id = %s AND m.relation_label = r.label AND s.label <> r.label""",
                [kg.pk, kg.pk],
            )
            cursor.execute(
                f"""INSERT INTO {_table(Relation)} (kg_id, external_id, label, description, aliases, domain, range, schema_source)
                SELECT DISTINCT ON (external_id) %s, external_id, label, description, aliases, '{{}}', '{{}}', ''
                FROM stage_relations
                ON CONFLICT (kg_id, external_id) DO UPDATE
                SET label = EXCLUDED.label, description = EXCLUDED.description, aliases = EXCLUDED.aliases,
                    embedding = CASE WHEN {_table(Relation)}.label = EXCLUDED.label
                                     THEN {_table(Relation)}.embedding END""",
                [kg.pk],
            )

        with timed("triples"):
            _stage(cursor, "stage_triples", "h text, r text, t text")
            rows = _with_progress(source.triples(), progress=progress, desc="triples", unit=" triples")
            staged = _copy(cursor, "stage_triples", "h, r, t", rows)
            if source.problems:
                raise ImportRejected(source.problems)  # rolls the whole transaction back
            log(f"Staged {staged:,} triples; linking ids…")
            _insert_referenced_ids(cursor, kg)
            # Fresh statistics let the planner hash-join instead of looping over 272k index probes.
            cursor.execute(f"ANALYZE stage_triples, {_table(Entity)}, {_table(Relation)}")
            cursor.execute(
                f"""INSERT INTO {_table(Triple)} (kg_id, head_id, relation_id, tail_id)
                SELECT %s, h.id, r.id, t.id FROM stage_triples s
                JOIN {_table(Entity)} h ON h.kg_id = %s AND h.external_id = s.h
                JOIN {_table(Relation)} r ON r.kg_id = %s AND r.external_id = s.r
                JOIN {_table(Entity)} t ON t.kg_id = %s AND t.external_id = s.t
                ORDER BY 2, 3, 4  -- index-ordered inserts keep the B-tree writes sequential
                ON CONFLICT (head_id, relation_id, tail_id) DO NOTHING""",
                [kg.pk] * 4,
            )

        with timed("degrees"):
            update_degrees(cursor, kg)

        with timed("passages"):
            _load_passages(cursor, kg, source, vectors)

        with timed("schema"):
            derive_relation_schema(cursor, kg)

        if source.problems:  # problems found in files read after the triples
            raise ImportRejected(source.problems)
        report.facts_changed = _facts(cursor, kg) != facts_before
        KnowledgeGraph.objects.filter(pk=kg.pk).update(version=F("version") + 1, loaded_at=timezone.now())
        kg.refresh_from_db()
        if not report.facts_changed:
            _carry_over_structure(kg)
        after = _counts(kg)
        report.counts = after
        report.added = {name: after[name] - before[name] for name in after}

    if embed:
        with timed("embed relations"):
            embed_relation_labels(kg, batch_size=batch_size)
    return report


def update_degrees(cursor, kg: KnowledgeGraph) -> None:
    """Store each entity's number of triples (both directions); path search prunes hubs by it."""
    cursor.execute(
        f"""WITH counts AS (
              SELECT id, sum(n) AS n FROM (
                SELECT head_id AS id, count(*) AS n FROM {_table(Triple)} WHERE kg_id = %s GROUP BY head_id
                UNION ALL
                SELECT tail_id, count(*) FROM {_table(Triple)} WHERE kg_id = %s GROUP BY tail_id
              ) ends GROUP BY id
            )
            UPDATE {_table(Entity)} e SET degree = coalesce(c.n, 0)
            FROM {_table(Entity)} e2 LEFT JOIN counts c ON c.id = e2.id
            WHERE e.id = e2.id AND e.kg_id = %s AND e.degree IS DISTINCT FROM coalesce(c.n, 0)""",
        [kg.pk, kg.pk, kg.pk],
    )


def _insert_referenced_ids(cursor, kg: KnowledgeGraph) -> None:
    """Entities and relations used by triples but not described by the source get their id as label."""
    cursor.execute(
        f"""INSERT INTO {_table(Entity)} (kg_id, external_id, label, description, aliases, types)
        SELECT %s, x, x, '', '{{}}', '{{}}' FROM (SELECT h AS x FROM stage_triples UNION SELECT t FROM stage_triples) ids
        ON CONFLICT (kg_id, external_id) DO NOTHING""",
        [kg.pk],
    )
    cursor.execute(
        f"""INSERT INTO {_table(Relation)} (kg_id, external_id, label, description, aliases, domain, range, schema_source)
        SELECT %s, r, r, '', '{{}}', '{{}}', '{{}}', '' FROM (SELECT DISTINCT r FROM stage_triples) ids
        ON CONFLICT (kg_id, external_id) DO NOTHING""",
        [kg.pk],
    )


def _load_passages(cursor, kg: KnowledgeGraph, source: KGSource, vectors: dict[tuple[str, str], str]) -> None:
    if not source.passages:
        return
    _stage(cursor, "stage_passages", "entity text, source text, url text, body text, embedding vector(384)")
    _copy(cursor, "stage_passages", "entity, source, url, body, embedding",
          ((p.entity_id, p.source, p.url, p.text, vectors.get((p.entity_id, p.source))) for p in source.passages))
    cursor.execute(
        f"""INSERT INTO {_table(Passage)} (kg_id, entity_id, source, url, text, embedding)
        SELECT DISTINCT ON (e.id, s.source) %s, e.id, s.source, s.url, s.body, s.embedding
        FROM stage_passages s JOIN {_table(Entity)} e ON e.kg_id = %s AND e.external_id = s.entity
        ON CONFLICT (entity_id, source) DO UPDATE
        SET url = EXCLUDED.url, text = EXCLUDED.text,
            embedding = COALESCE(EXCLUDED.embedding, {_table(Passage)}.embedding)""",
        [kg.pk, kg.pk],
    )


# Domain/range types: the most frequent types of a relation's heads (tails), kept while they cover at
# least this share of them, at most MAX_SCHEMA_TYPES of them.
MIN_SCHEMA_COVERAGE = 0.1
MAX_SCHEMA_TYPES = 5


def derive_relation_schema(cursor, kg: KnowledgeGraph) -> None:
    """Fill domain/range of relations with no declared schema from the types of observed heads/tails."""
    if not Entity.objects.filter(kg=kg).exclude(types=[]).exists():
        return
    for column, end in (("domain", "head_id"), ("range", "tail_id")):
        cursor.execute(
            f"""WITH ends AS (
                  SELECT t.relation_id, e.id AS entity_id, e.types FROM {_table(Triple)} t
                  JOIN {_table(Entity)} e ON e.id = t.{end} WHERE t.kg_id = %s
                ), totals AS (
                  SELECT relation_id, count(DISTINCT entity_id) AS n FROM ends GROUP BY relation_id
                ), per_type AS (
                  SELECT relation_id, unnest(types) AS type, count(DISTINCT entity_id) AS n FROM ends GROUP BY 1, 2
                ), ranked AS (
                  SELECT p.relation_id, p.type,
                         row_number() OVER (PARTITION BY p.relation_id ORDER BY p.n DESC, p.type) AS rank
                  FROM per_type p JOIN totals t USING (relation_id)
                  WHERE p.n >= %s * t.n
                )
                UPDATE {_table(Relation)} r SET {column} = coalesce(
                  (SELECT array_agg(type ORDER BY rank) FROM ranked WHERE ranked.relation_id = r.id AND rank <= %s),
                  '{{}}'), schema_source = 'derived'
                WHERE r.kg_id = %s AND r.schema_source IN ('', 'derived')""",
            [kg.pk, MIN_SCHEMA_COVERAGE, MAX_SCHEMA_TYPES, kg.pk],
        )


def embed_relation_labels(kg: KnowledgeGraph, *, batch_size: int = 64) -> int:
    """Embed the labels of relations that have none yet (used to rank neighbours by relation)."""
    missing = list(Relation.objects.filter(kg=kg, embedding__isnull=True).only("id", "label", "external_id"))
    if not missing:
        return 0
    vectors = encoder.encode([r.label or r.external_id for r in missing], batch_size=batch_size)
    for relation, vector in zip(missing, vectors, strict=True):
        relation.embedding = vector
    Relation.objects.bulk_update(missing, ["embedding"], batch_size=1000)
    return len(missing)


def _facts(cursor, kg: KnowledgeGraph) -> tuple[int, int]:
    """The KG's triples as (count, sum of 64-bit hashes of their row ids): equal before and after a load that
    changed none, and, short of a 64-bit collision, only then."""
    cursor.execute(
        f"""SELECT count(*),
                   coalesce(sum(('x' || left(md5(head_id || ' ' || relation_id || ' ' || tail_id), 16))::bit(64)::bigint), 0)
        FROM {_table(Triple)} WHERE kg_id = %s""",
        [kg.pk],
    )
    count, checksum = cursor.fetchone()
    return int(count), int(checksum)


def _carry_over_structure(kg: KnowledgeGraph) -> None:
    """A load that changed no triple (new names, descriptions or passages) leaves what was learnt from the triples
    valid: the structural models and mined rules of the previous version become the new version's, instead of a
    retraining that would learn the same triples again."""
    StructuralModel.objects.filter(kg=kg, kg_version=kg.version - 1).update(kg_version=kg.version)
    MinedRule.objects.filter(kg=kg, kg_version=kg.version - 1).update(kg_version=kg.version)


def _counts(kg: KnowledgeGraph) -> dict[str, int]:
    return {
        "entities": Entity.objects.filter(kg=kg).count(),
        "relations": Relation.objects.filter(kg=kg).count(),
        "triples": Triple.objects.filter(kg=kg).count(),
        "passages": Passage.objects.filter(kg=kg).count(),
        "embedded passages": Passage.objects.filter(kg=kg, embedding__isnull=False).count(),
    }
