"""Import speed of the bulk loader: FB15k-237 train (272,115 triples) into a fresh KG, then a reload.

    make install && DEBUG=1 .venv/bin/python bench/load_kg.py [--dataset fb15k-237] [--repeats 3]

Loads into a throw-away KG named ``bench-<dataset>`` (deleted afterwards), without embeddings: the
figure is the triple/entity/relation import itself. Prints seconds per stage and triples per second.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kgv_web.settings")
os.environ.setdefault("DEBUG", "1")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402

from verifier.kg.loader import load_source  # noqa: E402
from verifier.kg.sources import detect_source  # noqa: E402
from verifier.models import KnowledgeGraph  # noqa: E402


def drop(name: str) -> None:
    kg = KnowledgeGraph.objects.filter(name=name).first()
    if kg is None:
        return
    with connection.cursor() as cursor:  # set-based: the ORM cascade would walk 272k rows
        for table in ("verifier_triple", "verifier_passage", "verifier_entity", "verifier_relation", "verifier_entitytype"):
            cursor.execute(f"DELETE FROM {table} WHERE kg_id = %s", [kg.pk])
    kg.delete()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="fb15k-237")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    name = f"bench-{args.dataset}"
    fresh, reload = [], []
    for _ in range(args.repeats):
        drop(name)
        for bucket in (fresh, reload):
            started = time.perf_counter()
            report = load_source(detect_source(settings.KGV_DATA_DIR / args.dataset, name=name), embed=False)
            bucket.append(time.perf_counter() - started)
            stages = ", ".join(f"{k} {v:.2f}s" for k, v in report.timings.items())
            print(f"  {'fresh ' if bucket is fresh else 'reload'} {bucket[-1]:6.2f}s  ({stages})")
    triples = report.counts["triples"]
    drop(name)
    print(f"{args.dataset}: {triples:,} triples, {report.counts['entities']:,} entities, {report.counts['relations']:,} relations")
    print(f"fresh import : median {statistics.median(fresh):.2f}s  ({triples / statistics.median(fresh):,.0f} triples/s)")
    print(f"reload (no-op): median {statistics.median(reload):.2f}s")


if __name__ == "__main__":
    main()
