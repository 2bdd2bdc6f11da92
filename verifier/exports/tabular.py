"""JSON (everything about each run) and CSV (one row per run, for spreadsheets) exports."""

from __future__ import annotations

import csv
import io
import json

from django.core.serializers.json import DjangoJSONEncoder

from verifier.exports.records import RunRecord, Selection

JSON_FORMAT = "kgv-export/1"

CSV_COLUMNS = (
    "run_id", "task_id", "kg", "head_id", "head", "relation_id", "relation", "tail_id", "tail", "expected_label",
    "in_kg", "status", "verdict", "confidence", "disputed", "disputed_reason", "signals", "p_true", "structural_probability",
    "structural_model",
    "final_verdict", "agreement", "review_decision", "reviewer", "review_reason",
    "explanation", "model", "prompt_tokens", "completion_tokens", "cost_usd", "steps", "cited_evidence",
    "cited_sources", "cited_hashes", "claims", "claim_verdicts", "created_at", "finished_at",
)


def to_json(selection: Selection) -> str:
    document = {
        "format": JSON_FORMAT,
        "exported_at": selection.taken_at,
        "runs": [{**record.to_dict(), "claims": selection.claims_of(record.task_id)} for record in selection.records],
        "skipped_tasks": selection.skipped_tasks,
        "claims": [claim.to_dict() for claim in selection.claims],
    }
    return json.dumps(document, cls=DjangoJSONEncoder, indent=2, ensure_ascii=False)


def _number(value: float | None) -> float | str:
    return "" if value is None else value


def _csv_row(record: RunRecord, selection: Selection) -> dict:
    decision = record.decision
    cited = record.cited_evidence
    claims = selection.claims_of(record.task_id)
    verdicts = {claim.claim_id: claim.verdict for claim in selection.claims}
    return {
        "run_id": record.run_id, "task_id": record.task_id, "kg": record.kg,
        "head_id": record.head.id, "head": record.head.label,
        "relation_id": record.relation.id, "relation": record.relation.label,
        "tail_id": record.tail.id, "tail": record.tail.label,
        "expected_label": "" if record.expected_label is None else str(record.expected_label).lower(),
        "in_kg": "" if record.in_kg is None else str(record.in_kg).lower(),
        "status": record.status, "verdict": record.verdict,
        "confidence": _number(record.confidence),
        "disputed": str(record.disputed).lower(),
        "disputed_reason": record.disputed_reason,
        "signals": " | ".join(record.signals),
        "p_true": _number(record.p_true),
        "structural_probability": _number(record.structural_probability),
        "structural_model": record.structural_model,
        "final_verdict": record.final_verdict,
        "agreement": str(record.agreement),
        "review_decision": decision.decision if decision else "",
        "reviewer": decision.reviewer if decision else "",
        "review_reason": decision.reason if decision else "",
        "explanation": record.explanation, "model": record.model,
        "prompt_tokens": record.prompt_tokens, "completion_tokens": record.completion_tokens, "cost_usd": record.cost_usd,
        "steps": len(record.steps),
        # Several cited items share one cell, separated by " | " in the same order in all three columns.
        "cited_evidence": " | ".join(item.key for item in cited),
        "cited_sources": " | ".join(item.source for item in cited),
        "cited_hashes": " | ".join(item.content_hash for item in cited),
        # The selected claims this run's triple is a part of, and their verdicts, in the same order.
        "claims": " | ".join(map(str, claims)),
        "claim_verdicts": " | ".join(verdicts[pk] for pk in claims),
        "created_at": record.created_at.isoformat(),
        "finished_at": record.finished_at.isoformat() if record.finished_at else "",
    }


# A spreadsheet runs a cell that starts with one of these as a formula (=HYPERLINK(…) in a review reason, say).
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(value):
    """A text cell a spreadsheet would read as a formula, quoted with a leading apostrophe (OWASP's advice)."""
    return f"'{value}" if isinstance(value, str) and value.startswith(FORMULA_PREFIXES) else value


def to_csv(selection: Selection) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS, lineterminator="\r\n")
    writer.writeheader()
    for record in selection.records:
        writer.writerow({column: spreadsheet_safe(value) for column, value in _csv_row(record, selection).items()})
    return buffer.getvalue()
