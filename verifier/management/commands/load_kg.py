"""``manage.py load_kg codex-s`` — load a knowledge graph into the local store."""

from __future__ import annotations

import time
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from verifier import confidence
from verifier.kg.loader import ImportRejected, load_source
from verifier.kg.sources import SourceError, detect_source
from verifier.memory import bank
from verifier.models import KnowledgeGraph, MinedRule, StructuralModel
from verifier.structure.rules import mine_rules
from verifier.structure.training import request_training

DATASETS = {"codex-s": "codex-s", "fb15k-237": "fb15k-237"}
# A dataset's reference KG, loaded beside it where its files are (verifier/structure/reference.py): Freebase's facts
# about CoDEx-S's entities, matched by Wikidata id.
REFERENCES = {"codex-s": "fb15k-237"}


class Command(BaseCommand):
    help = (
        "Load a KG into the local store: a dataset name (codex-s, fb15k-237, read from KGV_DATA_DIR), "
        "a dataset folder, a TSV triples file or an N-Triples (.nt) file. Idempotent; all or nothing."
    )

    def add_arguments(self, parser):
        parser.add_argument("source", help="codex-s | fb15k-237 | path to a folder, .tsv/.txt or .nt file")
        parser.add_argument("--name", help="name of the KG in KGV (default: from the dataset or file name)")
        parser.add_argument("--replace", action="store_true", help="drop the KG's triples before loading")
        parser.add_argument("--no-embed", action="store_true", help="skip passage and relation embeddings")
        parser.add_argument("--no-progress", action="store_true", help="no progress bars")
        parser.add_argument("--no-reference", action="store_true",
                            help="do not load the dataset's reference KG beside it (codex-s: fb15k-237)")
        parser.add_argument("--no-kge", action="store_true",
                            help="do not queue the training of the KG's structural model (manage.py train_kge does it later)")

    def handle(self, *args, **options):
        raw = options["source"]
        path = settings.KGV_DATA_DIR / DATASETS[raw] if raw in DATASETS else Path(raw)
        try:
            source = detect_source(path, name=options["name"])
        except SourceError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"Loading {path} as '{source.name}'…")
        started = time.perf_counter()
        try:
            report = load_source(
                source,
                replace=options["replace"],
                embed=not options["no_embed"],
                progress=not options["no_progress"],
                batch_size=settings.KGV_EMBED_BATCH_SIZE,
                log=lambda message: self.stdout.write(message),
            )
        except ImportRejected as exc:
            raise CommandError(str(exc)) from None
        elapsed = time.perf_counter() - started
        timings = ", ".join(f"{stage} {seconds:.1f}s" for stage, seconds in report.timings.items())
        self.stdout.write(self.style.SUCCESS(f"Loaded in {elapsed:.1f}s: {report.summary()}"))
        self.stdout.write(f"  stages: {timings}")
        kept = StructuralModel.objects.ready_for(report.kg) if not report.facts_changed else None
        if not report.facts_changed:
            self.stdout.write(f"No triple changed: the mined rules{' and structural model #' + str(kept.pk) if kept else ''} "
                              f"carry over to v{report.kg.version}.")
        if not MinedRule.objects.filter(kg=report.kg, kg_version=report.kg.version).exists():
            started = time.perf_counter()
            rules = mine_rules(report.kg)
            self.stdout.write(f"Mined {rules:,} Horn rules (length ≤ 2) in {time.perf_counter() - started:.1f}s")
        if seeded := confidence.seed_kg_model(report.kg):
            self.stdout.write(confidence.seeded_line(seeded))
        if linked := bank.link_kg(report.kg):
            self.stdout.write(f"Memory bank: {linked} entries investigated on {report.kg.name} are now linked to it.")
        if raw in REFERENCES and not options["no_reference"]:
            add_reference(report.kg, REFERENCES[raw], self.stdout)
        if not options["no_kge"] and kept is None:
            queued = request_training(report.kg, reason="KG loaded")
            if queued is not None:
                self.stdout.write(f"Queued the structural model of {report.kg.name} (#{queued.pk}); a Celery worker trains it "
                                  f"in the background: progress at /health/ and on the workbench")


def add_reference(kg: KnowledgeGraph, name: str, stdout) -> None:
    """Make the named dataset the KG's reference KG: loaded first (without a structural model of its own) unless it
    is loaded or its files are missing; then ``manage.py references --add`` links it and refits a ready model's
    calibration to weigh it."""
    if kg.references.filter(name=name).exists():
        return
    if not KnowledgeGraph.objects.filter(name=name, version__gt=0).exists():
        if not (settings.KGV_DATA_DIR / DATASETS[name]).is_dir():
            stdout.write(f"No reference KG for {kg.name}: {settings.KGV_DATA_DIR / DATASETS[name]} is not there.")
            return
        stdout.write(f"Loading {name} as the reference KG of {kg.name}…")
        call_command("load_kg", name, "--no-kge", "--no-progress", stdout=stdout)
    stdout.write(f"{name} is the reference KG of {kg.name}: its calibration weighs what {name} holds about a "
                 f"triple (manage.py references {kg.name})")
    call_command("references", kg.name, "--add", name, stdout=stdout)
