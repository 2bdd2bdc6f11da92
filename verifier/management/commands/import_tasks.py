"""``manage.py import_tasks codex-s flagged.csv`` — queue flagged triples for verification.

``manage.py import_tasks codex-s --sample 20`` queues a labelled sample of the KG's validation split instead."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from verifier.errors import ApplicationError
from verifier.management.lookup import kg_named
from verifier.services import import_flagged_triples, queue_validation_sample


class Command(BaseCommand):
    help = (
        "Queue flagged triples (CSV or TSV: head, relation, tail[, label]; labels or ids) as verification "
        "tasks of a loaded KG. Rejects the whole file if any row is malformed, unknown or ambiguous. "
        "With --sample N and no file: N labelled triples of the KG's validation split (CoDEx-S, FB15k-237)."
    )

    def add_arguments(self, parser):
        parser.add_argument("kg", help="name of a loaded KG, e.g. codex-s")
        parser.add_argument("file", type=Path, nargs="?")
        parser.add_argument("--skip-invalid", action="store_true", help="queue the good rows, report the bad")
        parser.add_argument("--sample", type=int, metavar="N",
                            help="instead of a file: N labelled validation triples, half true, drawn as the KG's benchmark draws them")
        parser.add_argument("--seed", type=int, default=0, help="which sample (with --sample)")

    def handle(self, *args, **options):
        kg = kg_named(options["kg"])
        path: Path | None = options["file"]
        if (path is None) == (options["sample"] is None):
            raise CommandError("give either a file of flagged triples or --sample N")
        try:
            if path is None:
                report = queue_validation_sample(kg=kg, n=options["sample"], seed=options["seed"])
            elif not path.exists():
                raise CommandError(f"{path} does not exist")
            else:
                report = import_flagged_triples(kg=kg, path=path, skip_invalid=options["skip_invalid"])
        except ApplicationError as exc:  # a rejected file lists its bad rows
            raise CommandError(str(exc)) from None
        self.stdout.write(self.style.SUCCESS(
            f"Queued {report.created} task(s) from {report.lines} row(s); {report.already_queued} already queued."
        ))
