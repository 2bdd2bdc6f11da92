"""What an evaluation's weighed runs would conclude under the confidence model in force, without running them again.

A compact-profile verdict is the run's stored evidence weighed (verifier/agent/weighing.py), so after a refit
(``manage.py calibrate``) the verdicts an earlier agent or evidence evaluation would now give follow from its
stored runs: the language model's outputs are the same, only the weights changed. Triples a calibration, the
confidence model or the memory bank was fitted on without folds are left out (the new fit may have taken some of
them); a triple a cross-fitted confidence model was fitted on is weighed by the weights that left its fold out. So
the figures stay held-out. Prints accuracy with its Wilson 95% interval, F1, and the ECE of the new confidences;
changes nothing.

    DEBUG=1 .venv/bin/python bench/reweigh.py codex-compact-heldout-v4 [more evaluation names] [--against codex-kge-heldout]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kgv_web.settings")

import django  # noqa: E402

django.setup()

from scipy.stats import binomtest  # noqa: E402

from verifier import confidence  # noqa: E402
from verifier.agent.weighing import BRIEF_MODES, WEIGHED_MODES, decided  # noqa: E402
from verifier.evaluation import metrics  # noqa: E402
from verifier.evaluation.outcomes import collect, latest_items  # noqa: E402
from verifier.models import Evaluation  # noqa: E402


def reweighed(evaluation: Evaluation) -> tuple[list[metrics.Outcome], int]:
    """(held-out outcomes with the verdicts and confidences the weights in force give, how many were left out
    as fitted). As in a run (verifier/agent/verdict.py): a compact or evidence-mode verdict is the weighed
    decision; a paper-profile verdict is the model's answer and only its confidence changes."""
    model = confidence.active_model(evaluation.kg_id)
    if model is None:
        raise SystemExit("no confidence model is active: fit one with manage.py calibrate")
    runs = {item.task_id: item.run for item in latest_items(evaluation) if item.run is not None and item.run.is_finished}
    outcomes, _ = collect(evaluation)
    kept = [o for o in outcomes if not o.fitted]
    for i, outcome in enumerate(kept):
        run = runs[outcome.triple]
        weighed = run.config.get("mode") in BRIEF_MODES or run.config.get("profile") == "compact"
        if outcome.verdict is None or not (weighed or outcome.verdict in ("correct", "incorrect")):
            continue  # failed, or an abstention the weighing does not revisit
        # a cross-fitted model weighs a triple it was fitted on with the weights that left its fold out
        p_true = confidence.weights_of(model, confidence.fit_key(run.task)).probability(confidence.stored_evidence(run))
        verdict, sure = decided(p_true) if weighed else (outcome.verdict, p_true if outcome.verdict == "correct" else 1 - p_true)
        kept[i] = dataclasses.replace(outcome, verdict=verdict, confidence=sure)
    return kept, len(outcomes) - len(kept)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("evaluations", nargs="+", help="evaluation names (agent, evidence or reading mode)")
    parser.add_argument("--against", help="an evaluation of the same triples (e.g. the kge row) to compare with, "
                                          "triple by triple, as its runs concluded")
    args = parser.parse_args()
    for name in args.evaluations:
        evaluation = Evaluation.objects.filter(name=name).first()
        if evaluation is None:
            raise SystemExit(f"no evaluation named {name!r}")
        if evaluation.mode not in WEIGHED_MODES:
            raise SystemExit(f"{name} is a {evaluation.mode} evaluation; only {', '.join(WEIGHED_MODES)} runs are weighed")
        outcomes, fitted = reweighed(evaluation)
        figures = metrics.compute(outcomes)
        n, right = len(outcomes), sum(o.right for o in outcomes)
        low, high = binomtest(right, n).proportion_ci(method="wilson") if n else (0.0, 0.0)
        calibration = figures["calibration"] or {}
        print(f"{name}: {n} held-out verifications ({fitted} left out as fitted), re-weighed with confidence model "
              f"#{confidence.active_model(evaluation.kg_id).pk}: accuracy {figures['accuracy']:.1%} (Wilson 95% "
              f"{low:.1%}–{high:.1%}), F1 {figures['f1']:.1%}, P {figures['precision']:.1%}, R {figures['recall']:.1%}, "
              f"ECE {calibration.get('ece', float('nan')):.3f}")
        if args.against:
            print(paired(outcomes, args.against))


def paired(outcomes: list[metrics.Outcome], other_name: str) -> str:
    """Both verdicts on the triples both evaluations verified: accuracies, the discordant triples each way and
    McNemar's exact test on them."""
    other = Evaluation.objects.filter(name=other_name).first()
    if other is None:
        raise SystemExit(f"no evaluation named {other_name!r}")
    theirs = {o.triple: o.right for o in collect(other)[0]}
    shared = [o for o in outcomes if o.triple in theirs]
    if not shared:
        return f"  against {other_name}: no triple in common"
    only_ours = sum(1 for o in shared if o.right and not theirs[o.triple])
    only_theirs = sum(1 for o in shared if theirs[o.triple] and not o.right)
    p = binomtest(only_ours, only_ours + only_theirs).pvalue if only_ours + only_theirs else 1.0
    ours_right, their_right = sum(o.right for o in shared), sum(theirs[o.triple] for o in shared)
    return (f"  against {other_name} on the same {len(shared)} verifications: {ours_right / len(shared):.1%} against "
            f"{their_right / len(shared):.1%}; right only here {only_ours}, only there {only_theirs} (McNemar exact p = {p:.3f})")


if __name__ == "__main__":
    main()
