"""``manage.py import_tasks codex-s flagged.csv`` — queue flagged triples for verification."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from verifier.kg.loader import ImportRejected
from verifier.management.lookup import kg_named
from verifier.services import import_flagged_triples


class Command(BaseCommand):
    help = (
        "Queue flagged triples (CSV or TSV: head, relation, tail[, label]; labels or ids) as verification "
        "tasks of a loaded KG. Rejects the whole file if any row is malformed, unknown or ambiguous."
    )

    def add_arguments(self, parser):
        parser.add_argument("kg", help="name of a loaded KG, e.g. codex-s")
        parser.add_argument("file", type=Path)
        parser.add_argument("--skip-invalid", action="store_true", help="queue the good rows, report the bad")

    def handle(self, *args, **options):
        kg = kg_named(options["kg"])
        path: Path = options["file"]
        if not path.exists():
            raise CommandError(f"{path} does not exist")
        try:
            report = import_flagged_triples(kg=kg, path=path, skip_invalid=options["skip_invalid"])
        except ImportRejected as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(self.style.SUCCESS(
            f"Queued {report.created} task(s) from {report.lines} row(s); {report.already_queued} already queued."
        ))
