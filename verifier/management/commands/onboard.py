"""``manage.py onboard FILE --name NAME`` — a KG of one's own from a file (TSV triples or N-Triples with labels and
descriptions) to calibrated verdicts: load, rules, structural model, its own weighing; says what quality was reached
and how long each stage took (verifier/onboarding.py)."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from verifier import onboarding
from verifier.models import KnowledgeGraph, Onboarding


class Command(BaseCommand):
    help = "Onboard a KG from a file: load it, train and calibrate its structural model without labels, weigh its verdicts."

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path, help="a .tsv / .txt file of head<TAB>relation<TAB>tail, or an .nt file")
        parser.add_argument("--name", required=True, help="the KG's name (letters, digits, - and _)")
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args, **options):
        path, name = options["file"], options["name"]
        if not path.is_file():
            raise CommandError(f"{path} is not a file")
        if KnowledgeGraph.objects.filter(name=name).exclude(version=0).exists():
            raise CommandError(f"a KG named {name!r} is loaded already: choose another --name")
        row = Onboarding.objects.create(name=name, file=str(path.resolve()), stage="starting")
        bar = tqdm(total=1000, desc=name, disable=options["no_progress"], bar_format="{l_bar}{bar}| {elapsed} {postfix}")

        def report(fraction: float, text: str) -> None:
            bar.n = int(fraction * 1000)
            bar.set_postfix_str(text[:80], refresh=True)

        try:
            row = onboarding.run(row, report=report)
        finally:
            bar.close()
        if row.status != Onboarding.Status.FINISHED:
            raise CommandError(f"onboarding {name} failed: {row.error}")
        for line in onboarding.summary_lines(row):
            self.stdout.write(line)
