"""Choose a KG's embedding configuration by validation MRR, without touching its stored model.

Each configuration trains on exactly what `manage.py train_kge` would train on (the KG minus its queued
triples and calibration slice), stops early on what training stops on (half of the dataset's validation
split, or the slice for a KG without one), and is then scored on the dataset's validation split and on
the part of it early stopping never ranked (filtered by the KG and that split). Nothing is stored: the
KG's ready model and its calibration stay as they are.

    make install && DEBUG=1 .venv/bin/python bench/kge_search.py codex-s \\
        '{}' '{"learning_rate": 1e-3, "lr_decay": 0.5, "patience": 3}'

Each argument after the KG name is a JSON object of `KGEConfig` settings over the KG's default
(`kge.default_config`); `'{}'` is the default itself. One line per configuration: epochs, minutes, why it
stopped, the early-stopping MRR and the validation split's MRR and Hits@10, and what the verdict would get from
it: the structural calibration's cross-validated accuracy (as drawn and relation-matched) and ECE on the
KG's calibration triples, with the text features as they are — the better of Platt scaling and boosted
trees, as `train_kge` would choose — and, where the negatives are of two kinds (CoDEx-S: verified ones and
corruptions), the figures against each.

With ``--members K`` each configuration is trained K times (seeds seed, seed + 1, …) and the validation
MRR of the ensemble that averages the members' log-probabilities is printed after each member, with the
members' training minutes summed: whether averaging a few networks buys what one network cannot. With
``--ensemble`` the configurations given are the members, one network each: an ensemble of different kinds
(KvsAll beside 1vsAll, ComplEx beside RESCAL) rather than of seeds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kgv_web.settings")
os.environ.setdefault("DEBUG", "1")

import django  # noqa: E402

django.setup()

import numpy as np  # noqa: E402
import torch  # noqa: E402

from verifier.models import KnowledgeGraph, StructuralModel  # noqa: E402
from verifier.structure import kge  # noqa: E402
from verifier.structure.dataset import TrainingData, training_data  # noqa: E402
from verifier.structure.fitting import against_each_kind_line, cross_validated_metrics, structural_fit_set  # noqa: E402
from verifier.structure.scoring import LoadedModel, pack  # noqa: E402


def calibrated(kg: KnowledgeGraph, config: kge.KGEConfig, trained: kge.Trained, data: TrainingData) -> str:
    """The calibration's out-of-fold figures with this network in place of the stored one (nothing saved)."""
    ready = StructuralModel.objects.ready_for(kg)
    if ready is None:
        return "no ready model to take the calibration triples from"
    row = StructuralModel(kg=kg, kg_version=kg.version, config={"kge": config.to_dict()},
                          weights=pack(trained.model, data.entity_rows, data.relation_rows))
    fit_set = structural_fit_set(ready)
    figures = cross_validated_metrics(LoadedModel(row).features(fit_set.triples), fit_set)
    return (f"calibrated (n {len(fit_set.rows)}, {figures['kind']}): accuracy {figures['cross_validated_accuracy']:.3f}, "
            f"matched {figures['cross_validated_matched_accuracy']:.3f}, ECE {figures['cross_validated_ece']:.3f}"
            f"{against_each_kind_line(figures)}")


def log_probs(model, triples: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each triple's log p(tail | head, relation) and log p(head | tail, relation⁻¹) over all entities."""
    tails, heads = [], []
    with torch.inference_mode():
        for start in range(0, len(triples), 256):
            batch = torch.as_tensor(triples[start:start + 256])
            tails.append(torch.log_softmax(model.predict_t(batch[:, [0, 1]]), dim=1).numpy())
            heads.append(torch.log_softmax(model.predict_h(batch[:, [1, 2]]), dim=1).numpy())
    return np.concatenate(tails), np.concatenate(heads)


def filtered_mrr(scores: tuple[np.ndarray, np.ndarray], triples: np.ndarray, known: np.ndarray) -> float:
    """Filtered MRR over both sides, ties ranked at their mean (PyKEEN's "realistic" rank)."""
    tails, heads = defaultdict(set), defaultdict(set)
    for h, r, t in known.tolist():
        tails[(h, r)].add(t)
        heads[(r, t)].add(h)
    reciprocal = []
    for side, matrix in zip(("tail", "head"), scores, strict=True):
        for row, (h, r, t) in zip(matrix, triples.tolist(), strict=True):
            target, others = (t, tails[(h, r)]) if side == "tail" else (h, heads[(r, t)])
            row = row.copy()
            row[list(others - {target})] = -np.inf
            ties = int((row == row[target]).sum()) - 1
            reciprocal.append(1.0 / (1 + int((row > row[target]).sum()) + ties / 2))
    return float(np.mean(reciprocal))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kg", help="name of a loaded KG")
    parser.add_argument("configs", nargs="+", help="JSON objects of KGEConfig settings over the default")
    parser.add_argument("--members", type=int, default=1, help="train each configuration this many times and report the ensemble")
    parser.add_argument("--ensemble", action="store_true",
                        help="average the configurations' networks, one each, as one ensemble of different kinds")
    args = parser.parse_args()
    if args.ensemble and (args.members > 1 or len(args.configs) < 2):
        parser.error("--ensemble averages one network of each configuration: give two or more, without --members")
    kg = KnowledgeGraph.objects.get(name=args.kg)
    data = training_data(kg)
    known = data.known
    scored = data.validation if len(data.validation) else None
    base = kge.default_config(len(data.train), data.num_entities)
    print(f"{kg.name}: {len(data.train):,} training triples, {len(data.calibration):,} in the calibration slice, "
          f"{len(data.validation):,} validation triples ({len(data.stopping):,} ranked by early stopping); "
          f"default {base.to_dict()}", flush=True)
    filter_with = known
    runs = [(text, replace(base, **json.loads(text))) for text in args.configs]
    groups = [runs] if args.ensemble else [[run] * args.members for run in runs]
    for group in groups:
        summed, minutes = None, 0.0
        for member, (text, config) in enumerate(group):
            member_config = replace(config, seed=config.seed + (0 if args.ensemble else member))
            trained = kge.train(member_config, data.train, num_entities=data.num_entities, num_relations=data.num_relations,
                                validation=data.stopping, known=known)
            minutes += trained.seconds / 60
            line = (f"{text} (seed {member_config.seed}): {trained.epochs} epochs in {trained.seconds / 60:.1f} min "
                    f"({trained.stopped_because}); early-stopping MRR {trained.validation['mrr']:.3f}")
            if scored is not None:
                figures = kge.link_prediction(trained.model, scored, filter_with)
                unranked = kge.link_prediction(trained.model, data.unranked, filter_with)
                line += (f"; validation MRR {figures['mrr']:.3f}, Hits@10 {figures['hits_at_10']:.3f}, "
                         f"never ranked by early stopping {unranked['mrr']:.3f}")
                if len(group) > 1:
                    scores = log_probs(trained.model, scored)
                    summed = scores if summed is None else (summed[0] + scores[0], summed[1] + scores[1])
                    line += (f"; ensemble of {member + 1}: validation MRR "
                             f"{filtered_mrr(summed, scored, filter_with):.3f} in {minutes:.1f} min")
            print(f"{line}; {calibrated(kg, member_config, trained, data)}", flush=True)


if __name__ == "__main__":
    main()
