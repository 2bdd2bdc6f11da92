"""``manage.py claims_benchmark codex-s --n 100 --out claims.jsonl`` — write a claim benchmark from a loaded KG:
one-hop, conjunction, multi-hop, negation and existence claims, half true (verifier/claims/benchmark.py)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from verifier.benchmarks.datasets import DATASETS, TYPE_SCHEMES
from verifier.claims.benchmark import CATEGORIES, generate, write_jsonl
from verifier.errors import ApplicationError
from verifier.models import KnowledgeGraph


class Command(BaseCommand):
    help = "Write a balanced claim benchmark (JSONL) from a loaded KG and a file of its true triples."

    def add_arguments(self, parser):
        parser.add_argument("kg")
        parser.add_argument("--positives", type=Path,
                            help="true triples to write claims from (default: the dataset's validation split)")
        parser.add_argument("--n", type=int, default=100, help=f"claims, spread over {len(CATEGORIES)} categories")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--types", choices=TYPE_SCHEMES, default="auto", help="fine-grained types for corruptions")
        parser.add_argument("--out", type=Path, required=True)

    def handle(self, *args, **options):
        kg = KnowledgeGraph.objects.filter(name=options["kg"]).first()
        if kg is None or kg.version == 0:
            raise CommandError(f"the KG {options['kg']!r} is not loaded; run manage.py load_kg first")
        positives = options["positives"]
        if positives is None:
            if kg.name not in DATASETS:
                raise CommandError(f"give --positives: {kg.name} is not a dataset with a known validation split")
            positives = settings.KGV_DATA_DIR / DATASETS[kg.name].positives
        if options["n"] < len(CATEGORIES) * 2:
            raise CommandError(f"--n must be at least {len(CATEGORIES) * 2} (one true and one false claim per category)")
        try:
            claims = generate(kg, positives, n=options["n"], seed=options["seed"], types=options["types"])
        except ApplicationError as exc:
            raise CommandError(str(exc)) from None
        write_jsonl(claims, options["out"])
        counts = Counter((c.category, c.label) for c in claims)
        table = ", ".join(f"{cat} {counts[(cat, True)]}/{counts[(cat, False)]}" for cat in CATEGORIES)
        self.stdout.write(self.style.SUCCESS(f"Wrote {len(claims)} claims to {options['out']} (true/false: {table})"))
        if len(claims) < options["n"] - len(CATEGORIES):
            self.stdout.write(self.style.WARNING(f"only {len(claims)} of {options['n']} claims could be written from {positives}"))
