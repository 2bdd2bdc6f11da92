"""A KG audit at scale: a generated KG of millions of edges, audited end to end, with its time and peak memory.

    DEBUG=1 KGV_EMBEDDED_DIR=.embedded/bench .venv/bin/python bench/audit_scale.py --edges 5000000

The KG is generated (seeded): 50 entity types (of 20,000 entities each at 5M edges: ten edges an entity on
average), 200 relations each from one type to another,
a third of them functional (one value per subject), values drawn with a Zipf-like popularity; 1% of the edges are
then joined by noise as in bench/error_detection.py (half one element of a real triple replaced by a random
entity or relation of the KG, half random triples of its entities and relations).
It is loaded (``manage.py load_kg``, without embeddings) and audited in this process from the graph's statistics
(no structural model: training networks on millions of edges takes its own budget, up to an hour). Printed: the
seconds to load and to audit, the audit's throughput, its peak memory (this process's maximum resident set, read
after loading and after the audit), and the share of the noise among the top 1% of suspects.
"""

from __future__ import annotations

import argparse
import os
import resource
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
from django.core.management import call_command  # noqa: E402

from verifier.kg_audit.pipeline import run_here, scores, start_audit  # noqa: E402
from verifier.models import Entity, KnowledgeGraph  # noqa: E402

TYPES, RELATIONS = 50, 200
DEGREE = 10  # edges per entity on average (5M edges: 50 types of 20,000 entities)


def generate(edges: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(n, 3) int triples (entity ids 0 … TYPES·PER_TYPE − 1, relation ids) and whether each is noise."""
    rng = np.random.default_rng(seed)
    PER_TYPE = max(100, 2 * edges // (TYPES * DEGREE))  # noqa: N806
    domain, range_ = rng.integers(TYPES, size=RELATIONS), rng.integers(TYPES, size=RELATIONS)
    functional = rng.random(RELATIONS) < 1 / 3
    per = edges // RELATIONS
    popularity = 1.0 / np.arange(1, PER_TYPE + 1) ** 0.8
    popularity /= popularity.sum()
    parts = []
    for r in range(RELATIONS):
        if functional[r]:
            heads = rng.choice(PER_TYPE, size=min(per, PER_TYPE), replace=False)
        else:
            heads = rng.integers(PER_TYPE, size=per)
        tails = rng.choice(PER_TYPE, size=len(heads), p=popularity)
        parts.append(np.stack([domain[r] * PER_TYPE + heads, np.full(len(heads), r), range_[r] * PER_TYPE + tails], axis=1))
    triples = np.unique(np.concatenate(parts), axis=0)
    triples = triples[triples[:, 0] != triples[:, 2]]
    noise = max(1, len(triples) // 100)
    entities = np.unique(triples[:, [0, 2]])  # as the protocol draws them: entities of the KG
    replaced = triples[rng.choice(len(triples), noise // 2, replace=False)].copy()
    element = rng.integers(3, size=len(replaced))
    replaced[element == 0, 0] = rng.choice(entities, size=(element == 0).sum())
    replaced[element == 1, 1] = rng.integers(RELATIONS, size=(element == 1).sum())
    replaced[element == 2, 2] = rng.choice(entities, size=(element == 2).sum())
    random = np.stack([rng.choice(entities, size=noise - len(replaced)), rng.integers(RELATIONS, size=noise - len(replaced)),
                       rng.choice(entities, size=noise - len(replaced))], axis=1)
    noisy = np.unique(np.concatenate([replaced, random]), axis=0)
    keys = lambda t: (t[:, 0] * RELATIONS + t[:, 1]) * TYPES * PER_TYPE + t[:, 2]  # noqa: E731
    noisy = noisy[~np.isin(keys(noisy), keys(triples)) & (noisy[:, 0] != noisy[:, 2])]
    return np.concatenate([triples, noisy]), np.concatenate([np.zeros(len(triples), bool), np.ones(len(noisy), bool)])


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--edges", type=int, default=5_000_000)
    parser.add_argument("--reuse", action="store_true", help="audit the KG an earlier run loaded")
    args = parser.parse_args()
    name = f"generated-{args.edges // 1000}k"
    triples, is_noise = generate(args.edges)
    print(f"{name}: {len(triples):,} edges, {int(is_noise.sum()):,} of them noise", flush=True)
    seconds = {}
    if not (args.reuse and KnowledgeGraph.objects.filter(name=name, version__gt=0).exists()):
        started = time.monotonic()
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / f"{name}.tsv"
            with path.open("w") as handle:
                for h, r, t in triples.tolist():
                    handle.write(f"e{h}\tr{r}\te{t}\n")
            call_command("load_kg", str(path), "--name", name, "--replace", "--no-kge", "--no-embed", "--no-progress")
        seconds["load"] = time.monotonic() - started
    kg = KnowledgeGraph.objects.get(name=name)
    before = peak_mb()
    started = time.monotonic()
    audit = run_here(start_audit(kg=kg, queue=False, structural=False))
    seconds["audit"] = time.monotonic() - started
    rows, suspicion = scores(audit)
    external = dict(Entity.objects.filter(kg=kg).values_list("pk", "external_id"))
    noise_keys = {(f"e{h}", f"r{r}", f"e{t}") for h, r, t in triples[is_noise].tolist()}
    relations = dict(kg.relations.values_list("pk", "external_id"))
    top = np.argsort(-suspicion, kind="stable")[:max(1, len(rows) // 100)]
    found = sum((external[h], relations[r], external[t]) in noise_keys for h, r, t in rows[top].tolist())
    print(f"{name}: load {seconds.get('load', 0) / 60:.1f} min; audit {seconds['audit'] / 60:.1f} min "
          f"({len(rows) / seconds['audit']:,.0f} triples/s); peak memory {before:,.0f} MB after loading, {peak_mb():,.0f} MB "
          f"after the audit; noise among the top 1%: {found / len(top):.3f} (P@1%), AUC of the scorer on its own corruptions "
          f"{audit.metrics['auc']['all']}")


if __name__ == "__main__":
    main()
