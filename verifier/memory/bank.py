"""The memory bank: retrieval of similar past investigations (pgvector, HNSW, cosine), promotion of
reviewed runs, export and import."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from django.db import transaction
from django.db.models import Count
from django.utils import timezone
from pgvector.django import CosineDistance

from verifier.agent.prompts import LESSON_CHARS
from verifier.agent.steps import Memory
from verifier.errors import ApplicationError
from verifier.json_input import JSONRefused, parse_json
from verifier.kg.textfile import read_text
from verifier.memory import encoder
from verifier.models import KnowledgeGraph, MemoryEntry, Run, Verdict
from verifier.models.memory import UNREVIEWED

# Investigations of CoDEx-S and FB15k-237 training triples that a fresh installation starts with (make demo, evaluate_suite):
# reviewed by a curator, or bootstrapped and saying they await review; never the validation split the evaluation
# harness samples.
SEED_BANK = Path(__file__).resolve().parents[1] / "data" / "memory_bank.json"


# A run is guided by past cases of its own relation when they are at least this similar, and by cases of
# another relation only when nearly the same claim: a shared first name (similarity 0.67) is not a precedent.
MIN_SAME_RELATION_SIMILARITY = 0.3
MIN_OTHER_RELATION_SIMILARITY = 0.8


def _memory(entry: MemoryEntry) -> Memory:
    return Memory(entry.pk, entry.triple_text, entry.trajectory, entry.verdict, round(1 - float(entry.distance), 4),
                  lesson=entry.lesson, relation_label=entry.relation_label)


def _nearest(text: str, k: int, **filters) -> list[MemoryEntry]:
    return list(MemoryEntry.objects.filter(status=MemoryEntry.Status.ACTIVE, **filters)
                .annotate(distance=CosineDistance("embedding", encoder.encode_one(text))).order_by("distance")[:k])


def retrieve(text: str, k: int = 3) -> list[Memory]:
    """The k active entries closest in meaning to ``text`` ("head relation tail"), however close."""
    return [_memory(e) for e in _nearest(text, k)] if k > 0 else []


def for_claim(text: str, k: int = 3, relation_label: str = "", kg: KnowledgeGraph | None = None) -> list[Memory]:
    """The memories that guide a run: entries of the claim's relation on the claim's KG first (two KGs may give
    different relations one label; an entry whose KG is not loaded here has none yet), then near-identical
    claims of other relations or KGs; weak matches are refused (see the thresholds above)."""
    if k <= 0:
        return []
    same_kg = {"kg": kg} if kg is not None else {}
    same = [m for m in map(_memory, _nearest(text, k, relation_label=relation_label, **same_kg))
            if m.similarity >= MIN_SAME_RELATION_SIMILARITY] if relation_label else []
    others = [m for m in map(_memory, _nearest(text, k + len(same))) if m.similarity >= MIN_OTHER_RELATION_SIMILARITY
              and m.id not in {s.id for s in same}]
    return (same + others)[:k]


def trajectory_of(run: Run) -> str:
    """A run's investigation as the text a memory stores: thoughts, actions, observations, answer. A loop is
    trimmed: a step that repeats an earlier one word for word is left out, with the observation of a repeated
    action, so a promoted memory teaches the investigation and not its loop."""
    labels = {"thought": "Thought", "action": "Action", "observation": "Observation", "verdict": "Final Answer"}
    lines, seen, skipping, left_out = [], set(), False, 0
    for step in run.steps.exclude(kind="plan").order_by("seq"):
        key = (step.kind, step.tool, step.content.strip())
        if step.kind == "observation" and skipping:
            skipping, left_out = False, left_out + 1
            continue
        if key in seen and step.kind != "verdict":
            skipping, left_out = step.kind == "action", left_out + 1
            continue
        seen.add(key)
        content = step.content.strip()
        if step.kind == "observation" and len(content) > 600:
            content = content[:600] + " …"
        lines.append(f"{labels[step.kind]}: {content}")
    if left_out:
        lines.insert(len(lines) - 1 if lines and lines[-1].startswith("Final Answer") else len(lines),
                     f"({left_out} repeated step{'s' if left_out != 1 else ''} left out)")
    return "\n".join(lines)


LESSON_EVIDENCE = 3  # cited evidence items a lesson quotes at most


def lesson_of(run: Run, verdict: str | None = None, reason: str = "") -> str:
    """What a small model's prompt shows of this run as a past case (``prompts.LESSON_CHARS`` at most): what
    decided the verdict and the evidence it cited. Where the weighed evidence decided (a small model's run),
    that is the evidence, not the model's overruled reasoning. A curator's ``verdict`` that overrides the
    run's makes the curator's ``reason`` the lesson, since the run's evidence argued the other way."""
    if verdict is not None and verdict != run.verdict:
        overruled = run.get_verdict_display() if run.verdict else "no verdict"
        return (f"A curator overruled the agent's verdict ({overruled}): {reason.strip() or 'no reason given'}")[:LESSON_CHARS]
    cited = [item.text.strip() for item in run.support_items.filter(cited=True).order_by("id")][:LESSON_EVIDENCE]
    if run.assessment.get("decided_by") == "evidence":
        lesson = f"Decided by the weighed evidence, which gave the claim a probability of {run.assessment['p_true']:.2f} of being true:"
    else:
        lesson = run.explanation.strip() + (" Decisive evidence:" if cited else "")
    joiner = " "
    for text in cited:
        if len(lesson) + len(joiner) + len(text) > LESSON_CHARS:
            break
        lesson, joiner = lesson + joiner + text.rstrip("."), "; "
    lesson = lesson[:LESSON_CHARS].rstrip(":")
    return lesson if lesson.endswith(".") else lesson + "."


@transaction.atomic
def add_entry(*, triple_text: str, trajectory: str, verdict: str, relation_label: str = "", kg=None, kg_name: str = "",
              source_run: Run | None = None, promoted_by=None, provenance: str = "", lesson: str = "") -> MemoryEntry:
    """A new entry, embedded at once; ``kg_name`` defaults to ``kg``'s name (give it alone for a KG not loaded here)."""
    return MemoryEntry.objects.create(
        kg=kg, kg_name=kg_name or (kg.name if kg else ""), triple_text=triple_text, relation_label=relation_label,
        trajectory=trajectory, verdict=verdict, lesson=lesson,
        embedding=encoder.encode_one(triple_text), source_run=source_run, promoted_by=promoted_by, provenance=provenance,
    )


EXPORT_FIELDS = ("triple_text", "relation_label", "trajectory", "lesson", "verdict", "status", "provenance")


def export_bank(path: Path) -> int:
    """Every entry, with the name of the KG it was investigated on ("kg", "" when unknown)."""
    entries = [{**{f: getattr(e, f) for f in EXPORT_FIELDS}, "kg": e.kg_name} for e in MemoryEntry.objects.order_by("pk")]
    path.write_text(json.dumps({"format": "kgv-memory-bank/1", "entries": entries}, indent=2, ensure_ascii=False))
    return len(entries)


class BankFileError(ApplicationError):
    """The file is not a memory bank export KGV can import; nothing was imported."""


TEXT_FIELDS = {"triple_text": None, "trajectory": None, "lesson": None, "relation_label": 500, "provenance": 500, "kg": 100}


def read_bank(path: Path) -> list[dict]:
    """The entries of a memory bank export, each checked: required fields present, every field a string of
    the length the bank stores, a known verdict and status, no NUL byte. The first problem is a BankFileError.
    Entries come back with every field present (an empty optional field as "", no status as active)."""
    text, problem = read_text(path)
    if problem is not None:
        raise BankFileError(problem.message)
    try:
        data = parse_json(text)
    except json.JSONDecodeError as exc:
        raise BankFileError(f"invalid JSON at line {exc.lineno}: {exc.msg}") from None
    except JSONRefused as exc:  # nested too deep, a number or a character the bank cannot hold
        raise BankFileError(str(exc)) from None
    if not isinstance(data, dict) or data.get("format") != "kgv-memory-bank/1" or not isinstance(data.get("entries"), list):
        raise BankFileError("not a KGV memory bank export (a JSON object with format kgv-memory-bank/1 and a list of entries)")
    for number, row in enumerate(data["entries"], start=1):
        if not isinstance(row, dict):
            raise BankFileError(f"entry {number} is not a JSON object")
        missing = [f for f in ("triple_text", "trajectory", "verdict") if not row.get(f)]
        if missing:
            raise BankFileError(f"entry {number} lacks {', '.join(missing)}")
        for name, limit in TEXT_FIELDS.items():
            value = row.get(name) or ""
            if not isinstance(value, str) or "\x00" in value or (limit and len(value) > limit):
                shape = f"text of at most {limit} characters" if limit else "text"
                raise BankFileError(f"entry {number}: {name} must be {shape} without NUL bytes")
        if row["verdict"] not in Verdict.values:
            raise BankFileError(f"entry {number}: verdict {str(row['verdict'])[:40]!r} is not one of {', '.join(Verdict.values)}")
        if row.get("status", MemoryEntry.Status.ACTIVE) not in MemoryEntry.Status.values:
            raise BankFileError(f"entry {number}: status {str(row['status'])[:40]!r} is not one of "
                                f"{', '.join(MemoryEntry.Status.values)}")
    return [{**{name: row.get(name) or "" for name in TEXT_FIELDS}, "verdict": row["verdict"],
             "status": row.get("status", MemoryEntry.Status.ACTIVE)} for row in data["entries"]]


@dataclass(frozen=True)
class Imported:
    added: int
    updated: int  # entries here that awaited review, brought up to the file's reviewed or re-derived version
    unchanged: int
    linked: int = 0  # entries here not linked to a KG, now linked to the loaded KG the file names
    changes: tuple[tuple[MemoryEntry, dict], ...] = field(default=(), compare=False)  # each updated entry, its fields before

    def __str__(self) -> str:
        linked = f", {self.linked} linked to their KG" if self.linked else ""
        return f"{self.added} added, {self.updated} updated, {self.unchanged} already present{linked}"


REVIEWABLE_FIELDS = ("lesson", "status", "provenance")


@transaction.atomic
def import_bank(path: Path) -> Imported:
    """Entries are re-embedded; an entry with the same triple and trajectory is not added again. Where that
    entry still awaits review here and the file's version differs in lesson, status or provenance (a
    curator reviewed it elsewhere, or the lesson was derived again), it takes the file's version; an entry
    reviewed here is never overwritten. An entry keeps the name of its KG that the file gives, and is linked
    to that KG if it is loaded here (else once it is: link_kg). The whole file is checked first (read_bank):
    a bad entry imports nothing."""
    added = unchanged = linked = 0
    changes = []
    graphs = {kg.name: kg for kg in KnowledgeGraph.objects.all()}
    for row in read_bank(path):
        kg = graphs.get(row["kg"])
        present = MemoryEntry.objects.filter(triple_text=row["triple_text"], trajectory=row["trajectory"]).first()
        if present is not None:
            if not present.kg_name and row["kg"]:  # an entry imported from an export older than KG names
                present.kg_name = row["kg"]
                present.save(update_fields=["kg_name", "updated_at"])
            linked += link_kg(kg, [present.pk]) if kg is not None and present.kg_id is None else 0
            # a field the file leaves empty (an export older than lessons) keeps what is here
            incoming = {"lesson": row["lesson"] or present.lesson, "status": row["status"],
                        "provenance": row["provenance"] or present.provenance}
            if present.awaits_review and any(getattr(present, f) != incoming[f] for f in REVIEWABLE_FIELDS):
                changes.append((present, {name: getattr(present, name) for name in REVIEWABLE_FIELDS}))
                for name in REVIEWABLE_FIELDS:
                    setattr(present, name, incoming[name])
                present.save(update_fields=[*REVIEWABLE_FIELDS, "updated_at"])
            else:
                unchanged += 1
            continue
        entry = add_entry(triple_text=row["triple_text"], trajectory=row["trajectory"], verdict=row["verdict"],
                          relation_label=row["relation_label"], lesson=row["lesson"], kg=kg, kg_name=row["kg"],
                          provenance=row["provenance"] or f"imported from {path.name}")
        if row["status"] == MemoryEntry.Status.RETIRED:
            entry.status = MemoryEntry.Status.RETIRED
            entry.save(update_fields=["status"])
        added += 1
    return Imported(added, len(changes), unchanged, linked, tuple(changes))


def link_kg(kg: KnowledgeGraph, ids: list[int] | None = None) -> int:
    """Link the entries investigated on ``kg`` (by name) that are not linked yet, e.g. imported before it was
    loaded; only those of ``ids`` when given. How many."""
    entries = MemoryEntry.objects.filter(kg__isnull=True, kg_name=kg.name)
    if ids is not None:
        entries = entries.filter(pk__in=ids)
    return entries.update(kg=kg, updated_at=timezone.now())


def waiting_for_their_kg() -> str:
    """Which KGs not loaded here the bank holds cases of ("fb15k-237: 133"), or ""."""
    counts = (MemoryEntry.objects.filter(kg__isnull=True).exclude(kg_name="").values_list("kg_name")
              .annotate(n=Count("id")).order_by("kg_name"))
    return ", ".join(f"{name}: {n}" for name, n in counts)


def seed_if_empty() -> str | None:
    """Import the seed bank into an empty memory bank, and say what it added (None when the bank had entries)."""
    if MemoryEntry.objects.exists() or not SEED_BANK.exists():
        return None
    added = import_bank(SEED_BANK).added
    unreviewed = MemoryEntry.objects.filter(provenance__contains=UNREVIEWED).count()
    waiting = waiting_for_their_kg()
    return (f"Memory bank seeded with {added} investigations ({SEED_BANK.name}): {added - unreviewed} reviewed by a curator, "
            f"{unreviewed} bootstrapped from training triples and awaiting review."
            + (f" Cases of KGs not loaded yet ({waiting}) guide their claims once the KG is loaded." if waiting else ""))
