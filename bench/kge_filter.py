"""What true triples left out of the ranking filter cost a KG's validation MRR.

Published link-prediction figures (the CoDEx authors', libkge's) rank each test triple "filtered with
test": every known true triple of train, validation *and test* is removed from the candidates. Our
validation MRR can only filter with what we hold, the KG and its validation split; a dataset's test split
is not ours, so its true triples stay in the candidate lists and push the right answer down. This measures
the size of that effect on the KG's ready network, with true triples it never saw: the calibration slice
(and queued triples) held out of its training. The validation MRR is computed filtered by everything, then
with a growing share of those held-out triples left unfiltered; the cost per 1,000 unfiltered triples is
the slope, and ``--withheld N`` (a test split's size) extrapolates it.

    make install && DEBUG=1 .venv/bin/python bench/kge_filter.py codex-s --withheld 1828

Nothing is trained or stored.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kgv_web.settings")
os.environ.setdefault("DEBUG", "1")

import django  # noqa: E402

django.setup()

import numpy as np  # noqa: E402

from verifier.evaluation.datasets import dataset_validation  # noqa: E402
from verifier.models import HeldOutTriple, KnowledgeGraph, StructuralModel  # noqa: E402
from verifier.structure import kge  # noqa: E402
from verifier.structure.dataset import training_data  # noqa: E402
from verifier.structure.scoring import LoadedModel  # noqa: E402

SHARES = (0.0, 0.25, 0.5, 1.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kg", help="name of a loaded KG with a ready structural model")
    parser.add_argument("--withheld", type=int, default=0, help="size of a split missing from the filter (a test split)")
    parser.add_argument("--seed", type=int, default=0, help="which held-out triples are left unfiltered first")
    args = parser.parse_args()
    kg = KnowledgeGraph.objects.get(name=args.kg)
    row = StructuralModel.objects.ready_for(kg)
    if row is None:
        sys.exit(f"{kg.name} has no ready structural model: `manage.py train_kge {kg.name}`")
    network = LoadedModel(row).network
    data = training_data(kg)
    validation = dataset_validation(kg)
    if validation is None or not len(validation):
        sys.exit(f"{kg.name} is not a dataset with a validation split")
    validation = data.to_indices(validation)
    unseen = data.to_indices(np.array(list(HeldOutTriple.objects.filter(model=row).values_list(
        "head_id", "relation_id", "tail_id")), dtype=np.int64))
    np.random.default_rng(args.seed).shuffle(unseen)
    everything = {tuple(t) for t in data.known.tolist()}
    print(f"{kg.name}, network #{row.pk}: {len(validation):,} validation triples ranked; {len(unseen):,} KG triples "
          f"held out of its training ({len(unseen) / (len(everything) + len(validation)):.1%} of the triples known)")
    costs = []
    for share in SHARES:
        left_out = {tuple(t) for t in unseen[:round(share * len(unseen))].tolist()}
        known = np.array(sorted(everything - left_out), dtype=np.int64).reshape(-1, 3)
        figures = kge.link_prediction(network, validation, np.concatenate([known, validation]))
        if share == 0.0:
            base = figures["mrr"]
        else:
            costs.append((base - figures["mrr"]) / len(left_out) * 1000)
        print(f"  {len(left_out):>6,} held-out triples unfiltered: MRR {figures['mrr']:.4f} (head {figures['head_mrr']:.4f}, "
              f"tail {figures['tail_mrr']:.4f}), Hits@1 {figures['hits_at_1']:.4f}, Hits@10 {figures['hits_at_10']:.4f}")
    slope = float(np.mean(costs))
    print(f"cost: {slope:.4f} MRR per 1,000 unfiltered true triples (per share: {', '.join(f'{c:.4f}' for c in costs)})")
    if args.withheld:
        print(f"a split of {args.withheld:,} true triples missing from the filter: about {slope * args.withheld / 1000:.3f} "
              f"MRR; filtered with it, this network would score about {base + slope * args.withheld / 1000:.3f}")


if __name__ == "__main__":
    main()
