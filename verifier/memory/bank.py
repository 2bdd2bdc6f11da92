"""The memory bank: retrieval of similar past investigations (pgvector, HNSW, cosine), promotion of
reviewed runs, export and import."""

from __future__ import annotations

import json
from pathlib import Path

from django.db import transaction
from pgvector.django import CosineDistance

from verifier.agent.steps import Memory
from verifier.memory import encoder
from verifier.models import MemoryEntry, Run

# Reviewed investigations of CoDEx-S training triples that a fresh installation starts with (make demo,
# evaluate_suite); never the validation split the evaluation harness samples.
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


def for_claim(text: str, k: int = 3, relation_label: str = "") -> list[Memory]:
    """The memories that guide a run: entries of the claim's relation first, then near-identical claims of
    other relations; weak matches are refused (see the thresholds above)."""
    if k <= 0:
        return []
    same = [m for m in map(_memory, _nearest(text, k, relation_label=relation_label))
            if m.similarity >= MIN_SAME_RELATION_SIMILARITY] if relation_label else []
    others = [m for m in map(_memory, _nearest(text, k + len(same))) if m.similarity >= MIN_OTHER_RELATION_SIMILARITY
              and m.id not in {s.id for s in same}]
    return (same + others)[:k]


def trajectory_of(run: Run) -> str:
    """A run's investigation as the text a memory stores: thoughts, actions, observations, answer."""
    labels = {"thought": "Thought", "action": "Action", "observation": "Observation", "verdict": "Final Answer"}
    lines = []
    for step in run.steps.exclude(kind="plan").order_by("seq"):
        content = step.content.strip()
        if step.kind == "observation" and len(content) > 600:
            content = content[:600] + " …"
        lines.append(f"{labels[step.kind]}: {content}")
    return "\n".join(lines)


@transaction.atomic
def add_entry(*, triple_text: str, trajectory: str, verdict: str, relation_label: str = "", kg=None,
              source_run: Run | None = None, promoted_by=None, provenance: str = "", lesson: str = "") -> MemoryEntry:
    return MemoryEntry.objects.create(
        kg=kg, triple_text=triple_text, relation_label=relation_label, trajectory=trajectory, verdict=verdict, lesson=lesson,
        embedding=encoder.encode_one(triple_text), source_run=source_run, promoted_by=promoted_by, provenance=provenance,
    )


EXPORT_FIELDS = ("triple_text", "relation_label", "trajectory", "lesson", "verdict", "status", "provenance")


def export_bank(path: Path) -> int:
    entries = [{f: getattr(e, f) for f in EXPORT_FIELDS} for e in MemoryEntry.objects.order_by("pk")]
    path.write_text(json.dumps({"format": "kgv-memory-bank/1", "entries": entries}, indent=2, ensure_ascii=False))
    return len(entries)


@transaction.atomic
def import_bank(path: Path) -> tuple[int, int]:
    """(added, skipped as already present). Entries are re-embedded; identical triple+trajectory is skipped."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if data.get("format") != "kgv-memory-bank/1":
        raise ValueError(f"{path} is not a KGV memory bank export (format kgv-memory-bank/1)")
    added = skipped = 0
    for number, row in enumerate(data["entries"], start=1):
        missing = [f for f in ("triple_text", "trajectory", "verdict") if not row.get(f)]
        if missing:
            raise ValueError(f"{path}: entry {number} lacks {', '.join(missing)}")
        if MemoryEntry.objects.filter(triple_text=row["triple_text"], trajectory=row["trajectory"]).exists():
            skipped += 1
            continue
        entry = add_entry(triple_text=row["triple_text"], trajectory=row["trajectory"], verdict=row["verdict"],
                          relation_label=row.get("relation_label", ""), lesson=row.get("lesson", ""),
                          provenance=row.get("provenance") or f"imported from {path.name}")
        if row.get("status") == MemoryEntry.Status.RETIRED:
            entry.status = MemoryEntry.Status.RETIRED
            entry.save(update_fields=["status"])
        added += 1
    return added, skipped


def seed_if_empty() -> int:
    """Import the seed bank into an empty memory bank; the number of entries added (0 if it had any)."""
    if MemoryEntry.objects.exists() or not SEED_BANK.exists():
        return 0
    added, _ = import_bank(SEED_BANK)
    return added
