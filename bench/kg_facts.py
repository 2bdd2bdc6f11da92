"""Verdicts on facts the KG states: CoDEx-S's validation positives and hard negatives added to the KG, then drawn
as flagged triples and verified, beside the same draw verified while the KG lacks them.

    DEBUG=1 KGV_EMBEDDED_DIR=.embedded/bench-facts .venv/bin/python bench/kg_facts.py --n 1000 --seed 1
    DEBUG=1 KGV_EMBEDDED_DIR=.embedded/bench-heldout .venv/bin/python bench/kg_facts.py --n 1000 --seed 1 --held-out

Each arm needs its own embedded database (``KGV_EMBEDDED_DIR``): both name the KG codex-s, whose validation split
calibrates it. The facts arm loads CoDEx-S, adds the 3,654 labelled triples to it (a new version), trains its
structural model (one network per fold: every added triple is scored by a network that never learnt it), then
runs ``manage.py evaluate --benchmark codex-s`` in the mode asked (the evidence mode by default: the verdict the
compact agent gives) and counts the trainings the verification started (it must be none). The held-out arm does
the same without adding them. Prints accuracy, F1 and ECE with the evaluation's own figures.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kgv_web.settings")
os.environ.setdefault("DEBUG", "1")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402

from verifier import confidence  # noqa: E402
from verifier.benchmarks.datasets import read_rows  # noqa: E402
from verifier.kg.amend import amend  # noqa: E402
from verifier.models import Evaluation, KnowledgeGraph, StructuralModel  # noqa: E402
from verifier.structure.training import train  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--mode", default="evidence")
    parser.add_argument("--held-out", action="store_true", help="leave the labelled triples out of the KG")
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    if not KnowledgeGraph.objects.filter(name="codex-s", version__gt=0).exists():
        call_command("load_kg", "codex-s", "--no-kge", "--no-progress")
    kg = KnowledgeGraph.objects.get(name="codex-s")
    if not args.held_out:
        folder = settings.KGV_DATA_DIR / "codex-s" / "triples"
        labelled = read_rows(kg, folder / "valid.txt") + read_rows(kg, folder / "valid_negatives.txt")
        changed = amend(kg, add=[(r.head_id, r.relation_id, r.tail_id) for r in labelled])
        print(f"added {changed.added:,} labelled triples to codex-s (version {changed.version})", flush=True)
        kg.refresh_from_db()
    if StructuralModel.objects.filter(kg=kg, kg_version=kg.version, status="ready").first() is None:
        started = time.monotonic()
        model = train(kg)
        print(f"structural model #{model.pk} trained in {(time.monotonic() - started) / 60:.1f} min: validation MRR "
              f"{model.metrics['validation']['mrr']:.3f}, {model.metrics['calibration'].get('cross_validated_matched_accuracy')}",
              flush=True)
    confidence.seed_shipped_models()  # the verdicts are weighed as make demo weighs them
    models_before = StructuralModel.objects.count()
    name = f"kg-facts-{'held-out' if args.held_out else 'in-kg'}-{args.mode}-{args.n}-s{args.seed}"
    call_command("evaluate", "--benchmark", "codex-s", "--n", str(args.n), "--seed", str(args.seed), "--mode", args.mode,
                 "--name", name, "--no-progress", "--concurrency", "2")
    evaluation = Evaluation.objects.get(name=name)
    figures = evaluation.metrics
    print(f"{name}: accuracy {figures['accuracy']:.1%}, F1 {figures['f1']:.3f}, ECE {(figures.get('calibration') or {}).get('ece')}, "
          f"n {figures['n']}; trainings started while verifying: {StructuralModel.objects.count() - models_before}")


if __name__ == "__main__":
    main()
