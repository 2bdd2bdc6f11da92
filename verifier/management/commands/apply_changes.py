"""``manage.py apply_changes codex-s [--dry-run]`` — make a local KG state what its reviewers settled: remove the
triples settled Incorrect, add those settled Correct (the KG changes export, applied to KGV's own copy)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from verifier.errors import ApplicationError
from verifier.models import KnowledgeGraph
from verifier.settled_changes import apply_changes


class Command(BaseCommand):
    help = "Remove from a local KG the triples reviewers settled Incorrect and add those they settled Correct."

    def add_arguments(self, parser):
        parser.add_argument("kg", help="the local KG's name")
        parser.add_argument("--dry-run", action="store_true", help="list the changes without making them")

    def handle(self, *args, **options):
        kg = KnowledgeGraph.objects.filter(name=options["kg"]).first()
        if kg is None or kg.version == 0:
            raise CommandError(f"the KG {options['kg']!r} is not loaded; run manage.py load_kg first")
        try:
            applied = apply_changes(kg=kg, dry_run=options["dry_run"])
        except ApplicationError as exc:
            raise CommandError(str(exc)) from None
        for change in applied.changes:
            record = change.record
            self.stdout.write(f"{change.change:6}  {record.head.id} {record.relation.id} {record.tail.id}  "
                              f"({record.triple_text}; task {record.task_id}, {change.why})")
        if not applied.changes:
            self.stdout.write(f"Nothing to change: no task of {kg.name} has a settled decision the KG does not follow.")
        elif applied.amended is None:
            self.stdout.write(f"{len(applied.changes)} change(s) to make (dry run: nothing changed).")
        else:
            amended = applied.amended
            self.stdout.write(f"Removed {amended.removed} and added {amended.added} triple(s): {kg.name} is now version "
                              f"{amended.version}.")
            if applied.training is not None:
                self.stdout.write(f"Structural model #{applied.training.pk} is queued to train on it (progress at /health/).")
            else:
                self.stdout.write(f"A structural model of {kg.name} is being trained already; once it ends, train one "
                                  f"on this version: manage.py train_kge {kg.name}")
