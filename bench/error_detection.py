"""Error detection in a whole KG, on the protocol of the published detectors (CAGED, CIKM 2022; CCA, AAAI 2024).

    DEBUG=1 .venv/bin/python bench/error_detection.py wn18rr --noise 0.05
    DEBUG=1 .venv/bin/python bench/error_detection.py fb15k-237 --noise 0.05
    DEBUG=1 .venv/bin/python bench/error_detection.py codex-s --hard      # the harder track

The dataset's splits are merged into one graph (WN18RR: train, valid and test; FB15k-237: train and valid, as
shipped); noise equal to ``--noise`` of its triple count is added, half made by replacing one element (head,
relation or tail, chosen uniformly) of a real triple with a random one, half entirely random triples, never a
triple already there, Python's ``random`` seeded with 0. The noisy graph is loaded as a KG, its structural model
trained (the default for its size), and ``manage.py audit`` scores every triple. Printed: precision@K and recall@K
for K = 1%…5% of the original triple count, pooled and per kind of noise (the share of that kind found in the
pooled top K), and each kind's ROC AUC against the real triples.

The noisy graph is loaded with the dataset's names (WordNet's lemma and gloss; Freebase's name and Wikidata's
description; CoDEx-S's Wikidata labels, descriptions and types), as a KG of one's own comes: the audit compares the
names of each triple's ends. ``--ids-only`` loads the bare triples instead (as ``<name>-ids``), the detectors'
structure-only setting.

``--hard`` (CoDEx-S) injects instead type-constrained corruptions of real triples (an entity of the same types in
place of the head or the tail) and the dataset's hand-verified false triples (valid_negatives.txt).

The KG is loaded into the embedded database of ``KGV_EMBEDDED_DIR`` (default .embedded/bench) as
``<dataset>-noise<percent>`` and kept, so ``--reuse`` audits it again without loading or training.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kgv_web.settings")
os.environ.setdefault("DEBUG", "1")
os.environ.setdefault("KGV_EMBEDDED_DIR", ".embedded/bench")

import django  # noqa: E402

django.setup()

import numpy as np  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from sklearn.metrics import roc_auc_score  # noqa: E402

from verifier.kg_audit.names import named  # noqa: E402
from verifier.kg_audit.pipeline import run_here, scores, start_audit  # noqa: E402
from verifier.models import Entity, KnowledgeGraph, Relation, StructuralModel  # noqa: E402
from verifier.structure.training import train  # noqa: E402

SPLITS = {"wn18rr": ("train.txt", "valid.txt", "test.txt"), "fb15k-237": ("train.txt", "valid.txt"),
          "codex-s": ("triples/train.txt",)}
PUBLISHED = {  # the detectors' figures at 5% noise, for the table's last column
    ("wn18rr", 1): "CAGED 0.81–0.88, ADKGD 0.94", ("wn18rr", 5): "CAGED 0.49–0.51",
    ("fb15k-237", 5): "CAGED ≈0.47, CCA ≈0.53",
}


def read(dataset: str) -> list[tuple[str, str, str]]:
    folder = settings.KGV_DATA_DIR / dataset
    triples = []
    for split in SPLITS[dataset]:
        for line in (folder / split).read_text(encoding="utf-8").splitlines():
            parts = line.strip().split("\t")
            if len(parts) == 3:
                triples.append(tuple(parts))
    return list(dict.fromkeys(triples))


def inject(triples: list[tuple[str, str, str]], rate: float, seed: int = 0) -> dict[tuple[str, str, str], str]:
    """The noise (triple → "replaced" or "random"), as the CAGED protocol makes it."""
    rng = random.Random(seed)
    entities = sorted({e for h, _, t in triples for e in (h, t)})
    relations = sorted({r for _, r, _ in triples})
    present = set(triples)
    noise: dict[tuple[str, str, str], str] = {}
    total = round(rate * len(triples))
    while len(noise) < total:
        if len(noise) < total // 2:
            h, r, t = rng.choice(triples)
            element = rng.randrange(3)
            made = (rng.choice(entities), r, t) if element == 0 else (h, rng.choice(relations), t) if element == 1 \
                else (h, r, rng.choice(entities))
            kind = "replaced"
        else:
            made, kind = (rng.choice(entities), rng.choice(relations), rng.choice(entities)), "random"
        if made not in present and made not in noise and made[0] != made[2]:
            noise[made] = kind
    return noise


def hard_noise(triples: list[tuple[str, str, str]], rate: float, seed: int = 0) -> dict[tuple[str, str, str], str]:
    """CoDEx-S: half type-constrained corruptions of real triples, half its verified false triples."""
    folder = settings.KGV_DATA_DIR / "codex-s"
    types = json.loads((folder / "types" / "entity2types.json").read_text())
    by_type: dict[frozenset, list[str]] = {}
    for entity, entity_types in types.items():
        by_type.setdefault(frozenset(entity_types), []).append(entity)
    rng = random.Random(seed)
    present = set(triples)
    total = round(rate * len(triples))
    verified = [tuple(line.split("\t")) for line in (folder / "triples" / "valid_negatives.txt").read_text().splitlines() if line]
    rng.shuffle(verified)
    noise = {t: "verified false" for t in verified[:total // 2] if t not in present}
    while len(noise) < total:
        h, r, t = rng.choice(triples)
        side = rng.randrange(2)
        pool = by_type.get(frozenset(types.get(h if side == 0 else t, [])), [])
        if len(pool) < 2:
            continue
        other = rng.choice(pool)
        made = (other, r, t) if side == 0 else (h, r, other)
        if made not in present and made not in noise and made[0] != made[2]:
            noise[made] = "same type"
    return noise


# Where a dataset folder keeps its triples and what else it holds: the names, types and relations loaded beside them.
LAYOUT = {"wn18rr": ("train.txt", ("entity2text.txt", "relation2text.txt")),
          "fb15k-237": ("train.txt", ("entity2text.txt", "relation2text.txt", "entity2wikidata.json")),
          "codex-s": ("triples/train.txt", ("entities", "types", "relations.json"))}


def load(name: str, triples: list, noise: dict, *, names_of: str | None = None) -> KnowledgeGraph:
    """Load the noisy graph as ``name``: a TSV of its triples, or with ``names_of`` a dataset folder of them beside
    that dataset's names. A reload that changes no triple keeps the trained structural model."""
    with tempfile.TemporaryDirectory() as folder:
        lines = "".join("\t".join(t) + "\n" for t in [*triples, *noise])
        if names_of:
            path = Path(folder)
            triples_file, beside = LAYOUT[names_of]
            (path / triples_file).parent.mkdir(parents=True, exist_ok=True)
            (path / triples_file).write_text(lines, encoding="utf-8")
            for file in beside:
                (path / file).symlink_to(settings.KGV_DATA_DIR / names_of / file)
        else:
            path = Path(folder) / f"{name}.tsv"
            path.write_text(lines, encoding="utf-8")
        call_command("load_kg", str(path), "--name", name, "--replace", "--no-kge", "--no-embed", "--no-progress")
    return KnowledgeGraph.objects.get(name=name)


def table(ranked_noise_kind: np.ndarray, kinds: list[str], original: int) -> list[str]:
    """Lines of P@K / R@K (pooled) and the per-kind recall at K = 1..5% of ``original``."""
    total = int((ranked_noise_kind != "").sum())
    lines = [f"{'K':>4} {'P@K':>6} {'R@K':>6}  " + "  ".join(f"{'R@K ' + k:>16}" for k in kinds)]
    for percent in range(1, 6):
        k = round(percent / 100 * original)
        top = ranked_noise_kind[:k]
        found = int((top != "").sum())
        per_kind = "  ".join(f"{(top == kind).sum() / max((ranked_noise_kind == kind).sum(), 1):>16.3f}" for kind in kinds)
        lines.append(f"{percent:>3}% {found / k:>6.3f} {found / max(total, 1):>6.3f}  {per_kind}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", choices=sorted(SPLITS))
    parser.add_argument("--noise", type=float, default=0.05)
    parser.add_argument("--hard", action="store_true", help="CoDEx-S: same-type corruptions and verified false triples")
    parser.add_argument("--reuse", action="store_true", help="audit the KG loaded and trained by an earlier run again")
    parser.add_argument("--no-model", action="store_true", help="audit with the graph's statistics alone")
    parser.add_argument("--ids-only", action="store_true", help="load the bare triples, without the entities' names")
    args = parser.parse_args()
    triples = read(args.dataset)
    noise = hard_noise(triples, args.noise) if args.hard else inject(triples, args.noise)
    name = f"{args.dataset}-{'hard' if args.hard else 'noise'}{round(args.noise * 100)}{'-ids' if args.ids_only else ''}"
    names_of = None if args.ids_only else args.dataset
    print(f"{args.dataset}: {len(triples):,} triples, {len(noise):,} injected ({args.noise:.0%}) as {name}", flush=True)
    timings = {}
    kg = KnowledgeGraph.objects.filter(name=name).first()
    if not (args.reuse and kg is not None and (names_of is None or named(kg).exists())):
        started = time.monotonic()
        kg = load(name, triples, noise, names_of=names_of)
        timings["load"] = time.monotonic() - started
    if not args.no_model and StructuralModel.objects.ready_for(kg) is None:
        started = time.monotonic()
        model = train(kg, report=lambda fraction, stage: None)
        timings["training"] = time.monotonic() - started
        print(f"structural model #{model.pk}: validation MRR {model.metrics['validation']['mrr']:.3f}", flush=True)
    started = time.monotonic()
    audit = run_here(start_audit(kg=kg, queue=False, structural=not args.no_model))
    timings["audit"] = time.monotonic() - started
    rows, suspicion = scores(audit)
    external = dict(Entity.objects.filter(kg=kg).values_list("pk", "external_id"))
    relations = dict(Relation.objects.filter(kg=kg).values_list("pk", "external_id"))
    kind_of = np.array([noise.get((external[h], relations[r], external[t]), "") for h, r, t in rows.tolist()])
    order = np.argsort(-suspicion, kind="stable")
    kinds = sorted(set(noise.values()))
    print(f"\n{name}: audit #{audit.pk}, {len(rows):,} triples scored; classifier AUC on its own corruptions "
          f"{audit.metrics['auc']}")
    for line in table(kind_of[order], kinds, len(triples)):
        print(line)
    for kind in kinds:
        chosen = (kind_of == "") | (kind_of == kind)
        print(f"ROC AUC {kind}: {roc_auc_score(kind_of[chosen] == kind, suspicion[chosen]):.4f}")
    pooled = roc_auc_score(kind_of != "", suspicion)
    print(f"ROC AUC pooled: {pooled:.4f}")
    for (dataset, percent), figure in PUBLISHED.items():
        if dataset == args.dataset and not args.hard:
            print(f"published at 5% noise, P@{percent}%: {figure}")
    print("seconds: " + ", ".join(f"{stage} {seconds:.0f}" for stage, seconds in timings.items())
          + f"; audit throughput {len(rows) / timings['audit']:,.0f} triples/s")


if __name__ == "__main__":
    main()
