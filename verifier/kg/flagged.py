"""Reading and resolving files of flagged triples (CSV or TSV, by labels or by ids).

Columns: head, relation, tail and optionally label (true/false, 1/0, correct/incorrect). A header row
naming the columns is optional; without one the columns are taken in that order. Each term resolves to
exactly one entity (relation) of the KG by id, then by label, then by alias, case-insensitively; an
unknown or ambiguous term is a problem reported with its line number and the candidates, and an unknown
one with the closest names the KG has ("did you mean …?": trigram similarity for entities; for the few
relations, spelling, a shared word or meaning).
"""

from __future__ import annotations

import csv
import difflib
import io
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from django.db.models import Q
from django.db.models.functions import Lower
from pgvector.django import CosineDistance

from verifier.kg.store import PostgresKG
from verifier.kg.textfile import Problem, read_text
from verifier.memory import encoder
from verifier.models import Entity, KnowledgeGraph, Relation, VerificationTask
from verifier.queue_filters import by_origin

COLUMNS = ("head", "relation", "tail", "label")
_LABELS = {
    "true": True, "1": True, "correct": True, "yes": True, "positive": True,
    "false": False, "0": False, "incorrect": False, "no": False, "negative": False,
    "": None,
}
MAX_CANDIDATES_SHOWN = 5
SUGGESTIONS = 3  # closest names offered for an unknown term
MIN_RELATION_SIMILARITY = 0.5  # cosine of two relation names' embeddings ("born in", "place of birth": 0.72)
_WORD = re.compile(r"[^\W\d_]{4,}")  # a word worth sharing: four letters or more ("of", "at" are not)
MAX_SUGGESTED_TERMS = 50  # a file of garbage gets its first unknown terms suggested for, not a query per row


@dataclass
class FlaggedRow:
    line: int
    head: str
    relation: str
    tail: str
    label: bool | None


@dataclass
class ResolvedRow:
    line: int
    head_id: int
    relation_id: int
    tail_id: int
    label: bool | None


MAX_TERM_CHARS = 1000  # no entity or relation name is longer; a longer cell is a broken file


def read_flagged(path: Path) -> tuple[list[FlaggedRow], list[Problem]]:
    problems: list[Problem] = []
    rows: list[FlaggedRow] = []
    delimiter = "\t" if path.suffix.lower() in {".tsv", ".txt"} else ","
    text, problem = read_text(path)
    if problem is not None:
        return [], [problem]
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    order, named = list(range(4)), 0
    while True:
        try:
            record = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:  # e.g. a field over the csv module's size limit
            problems.append(Problem(path, reader.line_num, f"cannot read this line: {exc}"))
            break
        line = reader.line_num
        if not any(cell.strip() for cell in record):
            continue
        cells = [cell.strip() for cell in record]
        if line == 1 and {c.lower() for c in cells} >= {"head", "relation", "tail"}:
            lowered = [c.lower() for c in cells]
            order = [lowered.index(name) if name in lowered else -1 for name in COLUMNS]
            named = len(cells)
            continue
        if named and any(cells[named:]):
            problems.append(Problem(path, line, f"{len(cells)} cells, but the header names {named} columns"))
            continue
        if len(cells) not in (3, 4) and order == list(range(4)):
            problems.append(Problem(path, line, f"expected 3 or 4 columns (head, relation, tail[, label]), got {len(cells)}"))
            continue
        if any(len(cell) > MAX_TERM_CHARS for cell in cells):
            problems.append(Problem(path, line, f"a cell is longer than {MAX_TERM_CHARS} characters; no name in a KG is"))
            continue
        values = [cells[i] if 0 <= i < len(cells) else "" for i in order]
        head, relation, tail, label = values
        if not (head and relation and tail):
            problems.append(Problem(path, line, "head, relation and tail must all be given"))
            continue
        if label.lower() not in _LABELS:
            problems.append(Problem(path, line, f"label {label!r} is not one of true/false, 1/0, correct/incorrect"))
            continue
        rows.append(FlaggedRow(line, head, relation, tail, _LABELS[label.lower()]))
    return rows, problems


class _Index:
    """Lookup of the terms of a file against one model of one KG, in three set-based queries."""
    def __init__(self, model, kg: KnowledgeGraph, terms: set[str], suggest: Callable[[str], list[str]]):
        self.suggest, self.suggested = suggest, 0
        self.by_id: dict[str, int] = {}
        self.by_name: dict[str, set[int]] = defaultdict(set)
        self.by_alias: dict[str, set[int]] = defaultdict(set)
        self.describe: dict[int, str] = {}
        lowered = {t.lower() for t in terms}
        matches = (
            model.objects.filter(kg=kg)
            .annotate(label_lower=Lower("label"))
            .filter(Q(external_id__in=terms) | Q(label_lower__in=lowered) | Q(aliases__overlap=list(terms)))
        )
        for obj in matches.only("id", "external_id", "label", "description", "aliases"):
            self.by_id[obj.external_id] = obj.pk
            self.by_name[obj.label.lower()].add(obj.pk)
            for alias in obj.aliases:
                self.by_alias[alias.lower()].add(obj.pk)
            self.describe[obj.pk] = f"{obj.external_id} ({obj.label}{': ' + obj.description if obj.description else ''})"

    def resolve(self, term: str) -> tuple[int | None, str]:
        if term in self.by_id:
            return self.by_id[term], ""
        for table in (self.by_name, self.by_alias):
            found = table.get(term.lower(), set())
            if len(found) == 1:
                return next(iter(found)), ""
            if len(found) > 1:
                shown = "; ".join(self.describe[pk] for pk in sorted(found)[:MAX_CANDIDATES_SHOWN])
                return None, f"{term!r} is ambiguous ({len(found)} matches: {shown})"
        return None, f"{term!r} is not in the KG{self._did_you_mean(term)}"

    def _did_you_mean(self, term: str) -> str:
        if self.suggested >= MAX_SUGGESTED_TERMS:
            return ""
        self.suggested += 1
        names = self.suggest(term)
        return f" — did you mean {' or '.join(names)}?" if names else ""


def _similar_entities(kg: KnowledgeGraph) -> Callable[[str], list[str]]:

    store = PostgresKG(kg)
    return lambda term: [f"{c.label} ({c.id})" for c in store.similar_entities(term, limit=SUGGESTIONS)]


def _similar_relations(kg: KnowledgeGraph) -> Callable[[str], list[str]]:
    """The relations closest to an unknown relation name: by spelling (a typo: "contry"), by a word they share
    ("citizenship" → "country of citizenship") and by meaning, the label embeddings' cosine ("born in" → "place of
    birth"; the KG's relations are few, their labels embedded when it was loaded)."""
    names: dict[str, str] = {}
    for external_id, label, aliases in Relation.objects.filter(kg=kg).values_list("external_id", "label", "aliases"):
        for name in (label, external_id, *aliases):
            if name:
                names.setdefault(name.lower(), f"{label or external_id} ({external_id})")
    embedded = Relation.objects.filter(kg=kg, embedding__isnull=False)

    def by_meaning(term: str) -> list[str]:
        if not embedded.exists():
            return []
        nearest = embedded.annotate(distance=CosineDistance("embedding", encoder.encode_one(term))).order_by("distance")
        return [str(relation) for relation in nearest[:SUGGESTIONS] if 1 - relation.distance >= MIN_RELATION_SIMILARITY]

    def similar(term: str) -> list[str]:
        lowered = term.lower()
        close = difflib.get_close_matches(lowered, list(names), n=SUGGESTIONS * 2, cutoff=0.6)
        words = set(_WORD.findall(lowered))
        sharing = sorted((name for name in names if words & set(_WORD.findall(name))),
                         key=lambda name: -difflib.SequenceMatcher(None, lowered, name).ratio())
        return list(dict.fromkeys([*(names[name] for name in [*close, *sharing]), *by_meaning(term)]))[:SUGGESTIONS]

    return similar


def resolve_rows(kg: KnowledgeGraph, rows: list[FlaggedRow], path: Path) -> tuple[list[ResolvedRow], list[Problem]]:
    entities = _Index(Entity, kg, {r.head for r in rows} | {r.tail for r in rows}, _similar_entities(kg))
    relations = _Index(Relation, kg, {r.relation for r in rows}, _similar_relations(kg))
    resolved: list[ResolvedRow] = []
    problems: list[Problem] = []
    for row in rows:
        head, head_error = entities.resolve(row.head)
        relation, relation_error = relations.resolve(row.relation)
        tail, tail_error = entities.resolve(row.tail)
        errors = [e for e in (head_error, relation_error, tail_error) if e]
        if errors:
            problems.append(Problem(path, row.line, "; ".join(errors)))
            continue
        resolved.append(ResolvedRow(row.line, head, relation, tail, row.label))  # type: ignore[arg-type]
    return resolved, problems


PREVIEW_ROWS = 20


@dataclass
class PreviewRow:
    line: int
    head: Entity
    relation: Relation
    tail: Entity
    label: bool | None
    queued: bool  # already a task: importing leaves it as it is


@dataclass
class ImportPreview:
    lines: int
    resolved: int
    new: int  # triples the import would put in the work queue
    already_queued: int  # triples of the file the work queue holds already: left as they are
    repeated: int  # rows that name a triple an earlier row of the file names
    rows: list[PreviewRow]  # the first PREVIEW_ROWS resolved rows, as the KG names them
    problems: list[Problem]


def preview(kg: KnowledgeGraph, path: Path) -> ImportPreview:
    """What importing ``path`` into ``kg`` would queue, without queueing anything. A triple an evaluation drew has a
    task outside the work queue: the import moves it into the queue, so it counts as new, as the import counts it."""
    rows, problems = read_flagged(path)
    resolved, unresolved = resolve_rows(kg, rows, path)
    keys = {(r.head_id, r.relation_id, r.tail_id) for r in resolved}
    existing = VerificationTask.objects.filter(kg=kg, head_id__in={k[0] for k in keys}, relation_id__in={k[1] for k in keys})
    queued = set(by_origin(existing, "work").values_list("head_id", "relation_id", "tail_id")) & keys
    shown = resolved[:PREVIEW_ROWS]
    entities = Entity.objects.in_bulk({r.head_id for r in shown} | {r.tail_id for r in shown})
    relations = Relation.objects.in_bulk({r.relation_id for r in shown})
    return ImportPreview(
        lines=len(rows), resolved=len(resolved), new=len(keys - queued), already_queued=len(queued),
        repeated=len(resolved) - len(keys),
        rows=[PreviewRow(r.line, entities[r.head_id], relations[r.relation_id], entities[r.tail_id], r.label,
                         (r.head_id, r.relation_id, r.tail_id) in queued) for r in shown],
        problems=sorted(problems + unresolved, key=lambda p: p.line),
    )
