"""How many of an evaluation's negatives are really false, as a curator reads them, and what that does to its figure.

A benchmark without checked negatives (type-constrained corruptions, FB15k-237's) labels every corruption of a
true triple false. Under the open world some are true facts the KG lacks, and a verdict of Correct on one counts
as an error. The audit draws a random sample of an evaluation's negatives into a TSV file without the verdicts, so
the curator judges blind, marking each row ``true``, ``likely true``, ``unsure`` or ``false`` with a reason.
Drawing again into the same file adds negatives it lacks, so two draws form one larger random sample. The judged
file then gives the share of each judgement, the verdicts given to each, and the accuracy on the sample by the
dataset's label and by the judged one (``manage.py audit_labels``).
"""

from __future__ import annotations

import csv
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from verifier.errors import ApplicationError
from verifier.evaluation.metrics import wilson_interval
from verifier.models import Evaluation, EvaluationItem

JUDGEMENTS = ("true", "likely true", "unsure", "false")
COLUMNS = ("head", "relation", "tail", "head_label", "relation_label", "tail_label", "judgement", "reason")
JUDGED_TRUE = ("true", "likely true")

Key = tuple[str, str, str]


class AuditFileError(ApplicationError):
    """An audit file that cannot be read as one (the message names every bad line)."""


@dataclass(frozen=True)
class Drawn:
    written: int
    negatives: int  # the evaluation's negatives with a run
    held: int  # rows the file held before


@dataclass
class Audit:
    evaluation: str
    n: int  # judged rows that are negatives of the evaluation
    not_in_evaluation: int
    judgements: Counter = field(default_factory=Counter)
    verdicts: dict[str, Counter] = field(default_factory=dict)  # judgement → verdict counts
    right_by_label: int = 0
    by_judged: list[tuple[tuple[str, ...], int, int]] = field(default_factory=list)  # (counted true, right, settled)
    relations: list[tuple[str, int, int]] = field(default_factory=list)  # (relation, judged true or likely, judged)
    errors: int = 0  # verdicts of Correct on a negative
    errors_judged_true: int = 0


def negatives(evaluation: Evaluation) -> dict[Key, EvaluationItem]:
    """The evaluation's items labelled false that have a run, by (head, relation, tail) external ids, in the order
    the evaluation drew them."""
    items = (evaluation.items.filter(expected_label=False, run__isnull=False)
             .select_related("run", "task__head", "task__relation", "task__tail").order_by("position", "pk"))
    return {(i.task.head.external_id, i.task.relation.external_id, i.task.tail.external_id): i for i in items}


def write_sample(evaluation: Evaluation, path: Path, *, size: int, seed: int) -> Drawn:
    """Append a random sample of the evaluation's negatives that ``path`` lacks, blank for judging (the header
    first when the file is new)."""
    items = negatives(evaluation)
    held = {_key(row) for _, row in read_rows(path)} if path.exists() else set()
    remaining = [key for key in items if key not in held]
    chosen = random.Random(seed).sample(remaining, min(size, len(remaining)))
    if not chosen:
        return Drawn(written=0, negatives=len(items), held=len(held))
    with path.open("a", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, delimiter="\t")
        if not path.stat().st_size:
            writer.writerow(COLUMNS)
        for key in chosen:
            task = items[key].task
            writer.writerow([*key, task.head.label, task.relation.label, task.tail.label, "", ""])
    return Drawn(written=len(chosen), negatives=len(items), held=len(held))


def read_rows(path: Path) -> list[tuple[int, dict]]:
    """The rows of an audit file with their line numbers; a file without the audit's columns is refused."""
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            reader = csv.DictReader(handle, delimiter="\t")
            missing = [name for name in COLUMNS if name not in (reader.fieldnames or ())]
            if missing:
                raise AuditFileError(f"{path} is not an audit file: it lacks the column(s) {', '.join(missing)} "
                                     f"(an audit file is tab-separated with the header {' '.join(COLUMNS)})")
            return [(reader.line_num, row) for row in reader]
    except UnicodeDecodeError as error:
        raise AuditFileError(f"{path} is not UTF-8 text: {error}") from None


def read_judged(path: Path) -> list[dict]:
    """The rows of a judged audit file; every row without a judgement or with one not among ``JUDGEMENTS`` is
    named with its line."""
    rows = read_rows(path)
    bad = [f"line {line}: {(row.get('judgement') or '').strip() or 'no judgement'!r} "
           f"({row.get('head_label') or row.get('head')} — {row.get('relation_label') or row.get('relation')} — "
           f"{row.get('tail_label') or row.get('tail')})"
           for line, row in rows if (row.get("judgement") or "").strip() not in JUDGEMENTS]
    if bad:
        raise AuditFileError(f"{len(bad)} row(s) of {path} have no judgement among {', '.join(JUDGEMENTS)}:\n"
                             + "\n".join(bad))
    return [{**row, "judgement": row["judgement"].strip()} for _, row in rows]


def audit(evaluation: Evaluation, rows: list[dict]) -> Audit:
    """The verdicts of ``evaluation`` set against the judged rows that are its negatives."""
    items = negatives(evaluation)
    judged = [(row["judgement"], row.get("relation_label") or row["relation"], items[_key(row)])
              for row in rows if _key(row) in items]
    if not judged:
        raise AuditFileError(f"none of the {len(rows)} judged rows is a negative of the evaluation {evaluation.name}")
    result = Audit(evaluation=evaluation.name, n=len(judged), not_in_evaluation=len(rows) - len(judged))
    by_relation: dict[str, Counter] = {}
    for judgement, relation, item in judged:
        result.judgements[judgement] += 1
        result.verdicts.setdefault(judgement, Counter())[item.run.verdict] += 1
        result.right_by_label += item.run.verdict == "incorrect"
        by_relation.setdefault(relation, Counter())[judgement] += 1
        if item.run.verdict == "correct":
            result.errors += 1
            result.errors_judged_true += judgement in JUDGED_TRUE
    for counted_true in (("true",), JUDGED_TRUE):
        settled = [(judgement, item) for judgement, _, item in judged if judgement in (*counted_true, "false")]
        right = sum(item.run.verdict == ("correct" if judgement in counted_true else "incorrect") for judgement, item in settled)
        result.by_judged.append((counted_true, right, len(settled)))
    result.relations = sorted(((name, sum(c[j] for j in JUDGED_TRUE), c.total()) for name, c in by_relation.items()),
                              key=lambda r: (-r[1], -r[2], r[0]))
    return result


def audit_text(result: Audit) -> str:
    """The audit as a curator reads it in a terminal."""
    lines = [f"{result.n} judged negatives of {result.evaluation}"
             + (f" ({result.not_in_evaluation} rows of the file are not among them)" if result.not_in_evaluation else ""),
             "", f"{'judgement':<12} {'share (Wilson 95%)':<30} {'verdict Correct':<17} verdict Incorrect"]
    for judgement in JUDGEMENTS:
        verdicts = result.verdicts.get(judgement, Counter())
        lines.append(f"{judgement:<12} {share(result.judgements[judgement], result.n):<30} "
                     f"{verdicts['correct']:<17} {verdicts['incorrect']}")
    lines += ["", f"right by the dataset's label (false): {share(result.right_by_label, result.n)}"]
    for counted_true, right, settled in result.by_judged:
        lines.append(f"right by the judged label, {' and '.join(counted_true)} counted true, the rest left out: "
                     f"{share(right, settled)}")
    truest = [f"{name} {k}/{n}" for name, k, n in result.relations if k]
    lines.append("relations whose negatives were judged true or likely true (of judged): " + ("; ".join(truest) or "none"))
    if result.errors:
        lines.append(f"of the {result.errors} counted errors (Correct on a negative), judged true or likely true: "
                     f"{result.errors_judged_true}")
    return "\n".join(lines)


def share(k: int, n: int) -> str:
    """``k/n = p% (low–high)``, the Wilson 95% interval; ``0/0`` when nothing was counted."""
    if not n:
        return "0/0"
    low, high = wilson_interval(k, n)
    return f"{k}/{n} = {100 * k / n:.1f}% ({100 * low:.1f}–{100 * high:.1f})"


def _key(row: dict) -> Key:
    return (row["head"], row["relation"], row["tail"])
