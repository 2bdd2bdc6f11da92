"""The changes reviewers' decisions make to a KG: what to remove and what to add, for the KG's owners to apply.

A triple a reviewer settled Incorrect is removed where the KG states it; one settled Correct is added where the KG
lacks it. A decision settles the triple when every reviewer's latest decision on the standing run gives the same
verdict, Correct or Incorrect; a run nobody reviewed, reviewers who disagree and "not enough evidence" change
nothing. The agent's verdict alone never changes the KG: a curator who trusts it at a high confidence accepts
those verdicts in the queue first (an audited decision per task).

Two files: a TSV with a row for every selected task, its change or why there is none (so nothing selected is
left out unsaid), and a SPARQL 1.1 Update (``DELETE DATA`` / ``INSERT DATA``) of the changes alone, to run
against the store the KG came from. A remote KG (a SPARQL endpoint) is not looked up, so each settled decision
becomes its change there; removing a triple a store lacks, or adding one it has, changes nothing.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from verifier.exports.records import RunRecord, Selection, SelectionError
from verifier.exports.tabular import spreadsheet_safe
from verifier.kg.ntriples import term_iri
from verifier.models import Verdict, latest_decisions

REMOVE, ADD = "remove", "add"

TSV_COLUMNS = (
    "change", "why", "kg", "head_id", "relation_id", "tail_id", "head", "relation", "tail", "in_kg",
    "decision", "decided_by", "decided_at", "reason", "verdict", "confidence", "task_id", "run_id",
)


@dataclass(frozen=True)
class Change:
    """What one selected run's decisions do to its KG: ``change`` is remove, add or "" (nothing), ``why`` says so."""

    record: RunRecord
    change: str
    why: str
    decision: str  # the settled verdict ("" when nothing is settled)
    decisions: list  # each reviewer's latest decision on the run, newest first


def change_of(record: RunRecord) -> Change:
    """The one rule of this module: a settled decision against what the KG states (``record.in_kg``)."""
    decisions = latest_decisions(record.reviews)
    verdicts = {decision.verdict for decision in decisions}

    def change(op: str, why: str, decision: str = "") -> Change:
        return Change(record, op, why, decision, decisions)

    if not verdicts:
        return change("", "not reviewed")
    if len(verdicts) > 1:
        return change("", "reviewers disagree")
    (verdict,) = verdicts
    if verdict not in (Verdict.CORRECT, Verdict.INCORRECT):
        return change("", "reviewed: not enough evidence")
    settled = f"reviewed {Verdict(verdict).label}"
    unknown = f"{settled}; the remote KG was not looked up"
    if verdict == Verdict.INCORRECT:
        if record.in_kg is False:
            return change("", f"{settled}; the KG does not state it", verdict)
        return change(REMOVE, settled if record.in_kg else unknown, verdict)
    if record.in_kg:
        return change("", f"{settled}; the KG states it already", verdict)
    return change(ADD, settled if record.in_kg is False else unknown, verdict)


def changes(selection: Selection) -> list[Change]:
    return [change_of(record) for record in selection.records]


def _cell(value) -> str:
    """A TSV cell: one line, no tab, never read as a formula by a spreadsheet."""
    text = "" if value is None else str(value)
    return str(spreadsheet_safe(" ".join(text.split())))


def _row(change: Change) -> dict:
    record, decisions = change.record, change.decisions
    latest = decisions[0] if decisions else None
    return {
        "change": change.change, "why": change.why, "kg": record.kg,
        "head_id": record.head.id, "relation_id": record.relation.id, "tail_id": record.tail.id,
        "head": record.head.label, "relation": record.relation.label, "tail": record.tail.label,
        "in_kg": "" if record.in_kg is None else str(record.in_kg).lower(),
        "decision": change.decision,
        "decided_by": ", ".join(sorted(decision.reviewer for decision in decisions)),
        "decided_at": latest.created_at.isoformat() if latest else "",
        "reason": latest.reason if latest else "",
        "verdict": record.verdict, "confidence": "" if record.confidence is None else record.confidence,
        "task_id": record.task_id, "run_id": record.run_id,
    }


def to_tsv(selection: Selection) -> str:
    """Every selected run's row: ``change`` is remove, add or empty, ``why`` says why; tab-separated, one line each."""
    lines = ["\t".join(TSV_COLUMNS)]
    lines += ["\t".join(_cell(row[column]) for column in TSV_COLUMNS) for row in map(_row, changes(selection))]
    return "\r\n".join(lines) + "\r\n"


def _comment(text: str) -> str:
    return "# " + " ".join(text.split())


def to_sparql_update(selection: Selection, base: str = "") -> str:
    """The changes as one SPARQL 1.1 Update request for the KG's own store: ``DELETE DATA`` of what reviewers found
    Incorrect, then ``INSERT DATA`` of what they found Correct; comments name every run and what was left out. Each
    id is written as its IRI (``term_iri``: Wikidata ids as Wikidata's, IRIs as they are, others as ``urn:kgv:``
    names); ``base`` is not used: a KG's terms are named the same however the file is fetched."""
    every = changes(selection)
    kgs = sorted({change.record.kg for change in every})
    if len(kgs) > 1:
        raise SelectionError(f"a SPARQL Update changes one KG, and these tasks are of {len(kgs)} ({', '.join(kgs)}): "
                             "select one KG's tasks, or export the changes as TSV")
    kg = kgs[0] if kgs else ""

    def iri(external_id: str, *, relation: bool = False) -> str:
        return f"<{term_iri(kg, external_id, relation=relation)}>"

    lines = [_comment(f"KGV: changes to {kgs[0] if kgs else 'no KG'} from reviewers' decisions, "
                      f"{selection.taken_at.isoformat()}")]
    left_out = Counter(change.why for change in every if not change.change)
    if left_out:
        lines.append(_comment("unchanged: " + "; ".join(f"{count} {why}" for why, count in sorted(left_out.items()))))
    if selection.skipped_tasks:
        lines.append(_comment(f"tasks without a finished run: {', '.join(map(str, selection.skipped_tasks))}"))
    blocks = []
    for operation, op in (("DELETE DATA", REMOVE), ("INSERT DATA", ADD)):
        chosen = [change for change in every if change.change == op]
        if not chosen:
            continue
        body = []
        for change in chosen:
            record = change.record
            body.append(_comment(f"task {record.task_id}, run {record.run_id}: {record.triple_text} ({change.why})"))
            body.append(f"  {iri(record.head.id)} {iri(record.relation.id, relation=True)} {iri(record.tail.id)} .")
        blocks.append(f"{operation} {{\n" + "\n".join(f"  {line}" if line.startswith("#") else line for line in body)
                      + "\n}")
    lines.append(" ;\n".join(blocks) if blocks else _comment("nothing to change"))
    return "\n".join(lines) + "\n"
