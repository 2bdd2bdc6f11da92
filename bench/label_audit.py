"""How many of a benchmark's negatives are false, read by a curator, and what that does to an evaluation's figure.

A benchmark without verified negatives (FB15k-237) labels a type-constrained corruption of a true triple false. Under
the open world some corruptions are true facts the KG lacks, and a verdict of Correct on one counts as an error. The
audit draws a random sample of an evaluation's negatives and writes them to a file without the verdicts, so the
reader judges blind; each row is then marked ``true``, ``likely true``, ``unsure`` or ``false`` with a reason. Run on
the same file again, it draws more from the negatives the file lacks. Given the judged file, it prints the share of
each judgement (Wilson 95%), the verdicts given to each, and the accuracy on the sample's negatives by the dataset's
label and by the judged one. Changes nothing.

    DEBUG=1 .venv/bin/python bench/label_audit.py fb-agent-500-s10-s35 --sample 80 --seed 2026 --write audit.tsv   # again to draw more
    DEBUG=1 .venv/bin/python bench/label_audit.py fb-agent-500-s10-s35 --judged bench/audits/fb15k-237-valid-negatives-s10.tsv
"""

from __future__ import annotations

import argparse
import csv
import os
import random
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kgv_web.settings")

import django  # noqa: E402

django.setup()

from verifier.evaluation.metrics import wilson_interval  # noqa: E402
from verifier.models import Evaluation  # noqa: E402

JUDGEMENTS = ("true", "likely true", "unsure", "false")
COLUMNS = ["head", "relation", "tail", "head_label", "relation_label", "tail_label", "judgement", "reason"]


def negatives(evaluation: Evaluation) -> dict[tuple[str, str, str], object]:
    """The evaluation's items labelled false that have a run, by (head, relation, tail) external ids."""
    items = (evaluation.items.filter(expected_label=False, run__isnull=False)
             .select_related("run", "task__head", "task__relation", "task__tail").order_by("pk"))
    return {(i.task.head.external_id, i.task.relation.external_id, i.task.tail.external_id): i for i in items}


def write_sample(evaluation: Evaluation, size: int, seed: int, path: Path) -> None:
    """A random sample of the evaluation's negatives, blank for judging. When ``path`` exists the sample is drawn
    from the negatives it lacks and appended, so a judged sample grows into a larger random sample."""
    items = negatives(evaluation)
    present = {(r["head"], r["relation"], r["tail"]) for r in _rows(path)} if path.exists() else set()
    remaining = [key for key in items if key not in present]  # in the order the evaluation drew them
    chosen = random.Random(seed).sample(remaining, min(size, len(remaining)))
    with path.open("a", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, delimiter="\t")
        if not present:
            writer.writerow(COLUMNS)
        for key in chosen:
            task = items[key].task
            writer.writerow([*key, task.head.label, task.relation.label, task.tail.label, "", ""])
    print(f"{len(chosen)} of {len(items)} negatives of {evaluation.name} written to {path}"
          f"{f' after the {len(present)} it held' if present else ''}: mark each row's judgement "
          f"({' / '.join(JUDGEMENTS)}) and reason, then run again with --judged {path}")


def _rows(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


def _share(k: int, n: int) -> str:
    low, high = wilson_interval(k, n)
    return f"{k}/{n} = {100 * k / n:.1f}% ({100 * low:.1f}–{100 * high:.1f})"


def report(evaluation: Evaluation, path: Path) -> None:
    items = negatives(evaluation)
    rows = _rows(path)
    unknown = [r for r in rows if r["judgement"] not in JUDGEMENTS]
    if unknown:
        raise SystemExit(f"{len(unknown)} row(s) of {path} have no judgement among {', '.join(JUDGEMENTS)} "
                         f"(first: {unknown[0]['head_label']} — {unknown[0]['relation_label']} — {unknown[0]['tail_label']})")
    judged = [(r, items[(r["head"], r["relation"], r["tail"])]) for r in rows if (r["head"], r["relation"], r["tail"]) in items]
    if not judged:
        raise SystemExit(f"none of the rows of {path} is a negative of {evaluation.name}")
    n = len(judged)
    print(f"{n} judged negatives of {evaluation.name} ({len(rows) - n} rows of the file are not in it)\n")
    print(f"{'judgement':<12} {'share of the sample (Wilson 95%)':<34} verdict Correct   verdict Incorrect")
    counts = Counter(r["judgement"] for r, _ in judged)
    for judgement in JUDGEMENTS:
        verdicts = Counter(item.run.verdict for r, item in judged if r["judgement"] == judgement)
        print(f"{judgement:<12} {_share(counts[judgement], n):<34} {verdicts['correct']:<17} {verdicts['incorrect']}")
    by_dataset = sum(item.run.verdict == "incorrect" for _, item in judged)
    print(f"\nright by the dataset's label (false): {_share(by_dataset, n)}")
    for relabelled in (("true",), ("true", "likely true")):
        settled = [(r, item) for r, item in judged if r["judgement"] in (*relabelled, "false")]
        right = sum(item.run.verdict == ("correct" if r["judgement"] in relabelled else "incorrect") for r, item in settled)
        print(f"right by the judged label, {' and '.join(relabelled)} counted true, the rest left out: {_share(right, len(settled))}")
    by_relation: dict[str, Counter] = {}
    for r, _ in judged:
        by_relation.setdefault(r["relation_label"], Counter())[r["judgement"]] += 1
    truest = sorted(((c["true"] + c["likely true"], c.total(), name) for name, c in by_relation.items()), reverse=True)
    print("\nrelations whose negatives were judged true or likely true, most first (of judged):",
          "; ".join(f"{name} {k}/{n}" for k, n, name in truest if k))
    errors = [(r, item) for r, item in judged if item.run.verdict == "correct"]
    if errors:
        judged_true = sum(r["judgement"] in ("true", "likely true") for r, _ in errors)
        print(f"of the {len(errors)} counted errors (Correct on a negative), judged true or likely true: {judged_true}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("evaluation", help="the name of a stored evaluation")
    parser.add_argument("--sample", type=int, default=80, help="negatives to draw (with --write)")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--write", type=Path, help="write a blind sample to judge to this TSV file (an existing one grows)")
    parser.add_argument("--judged", type=Path, help="a judged TSV file to report on")
    args = parser.parse_args()
    evaluation = Evaluation.objects.filter(name=args.evaluation).first()
    if evaluation is None:
        raise SystemExit(f"no evaluation named {args.evaluation!r}")
    if args.write:
        write_sample(evaluation, args.sample, args.seed, args.write)
    elif args.judged:
        report(evaluation, args.judged)
    else:
        parser.error("give --write FILE to draw a sample or --judged FILE to report on one")


if __name__ == "__main__":
    main()
