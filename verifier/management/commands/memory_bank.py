"""``manage.py memory_bank export bank.json`` / ``import bank.json`` — move the memory bank between
installations (entries are re-embedded on import; an entry already here is not added again, and takes the
file's lesson, status and provenance only while it awaits a curator's review).

``manage.py memory_bank bootstrap --kg codex-s --n 100`` — build candidate memories from the KG's own
training triples (verifier/memory_bootstrap.py): the agent investigates them through Celery like an
evaluation (resumable: run the same command again), and the runs that reached the right verdict become
entries for curators to review."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from verifier import memory_bootstrap, services
from verifier.evaluation.driver import EvaluationError
from verifier.evaluation.labelled import investigate
from verifier.evaluation.workers import WorkerUnfit
from verifier.management.lookup import kg_named
from verifier.memory import bank
from verifier.structure.training import TrainingError, wait_for_model


class Command(BaseCommand):
    help = "Export, import or bootstrap the memory bank of curated investigations."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["export", "import", "bootstrap"])
        parser.add_argument("path", type=Path, nargs="?", help="the JSON file (export, import)")
        parser.add_argument("--kg", help="bootstrap: the KG whose training triples are investigated")
        parser.add_argument("--n", type=int, default=100, help="bootstrap: triples to investigate (half true)")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--concurrency", type=int, default=1)
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args, **options):
        if options["action"] == "bootstrap":
            return self._bootstrap(options)
        path: Path | None = options["path"]
        if path is None:
            raise CommandError(f"{options['action']} needs the path of a JSON file")
        if options["action"] == "export":
            count = bank.export_bank(path)
            self.stdout.write(self.style.SUCCESS(f"Exported {count} memory entries to {path}"))
            return
        if not path.exists():
            raise CommandError(f"{path} does not exist")
        try:
            imported = services.import_memory_bank(path)
        except bank.BankFileError as exc:
            raise CommandError(f"{path}: {exc}; nothing was imported") from None
        self.stdout.write(self.style.SUCCESS(f"Imported {path}: {imported}"))
        if waiting := bank.waiting_for_their_kg():
            self.stdout.write(f"Cases of KGs not loaded here ({waiting}) guide their claims once the KG is loaded "
                              "(manage.py load_kg).")

    def _bootstrap(self, options) -> None:
        if not options["kg"]:
            raise CommandError("bootstrap needs --kg NAME of a loaded KG")
        kg = kg_named(options["kg"], loaded=True)
        name = f"memory-bootstrap-{kg.name}-n{options['n']}-s{options['seed']}"
        try:
            wait_for_model(kg, log=self.stdout.write)
            evaluation = investigate(kg, name, lambda: memory_bootstrap.draw(kg, options["n"], seed=options["seed"]),
                                     seed=options["seed"], concurrency=options["concurrency"],
                                     progress=not options["no_progress"], log=self.stdout.write)
        except (EvaluationError, TrainingError, ValueError, WorkerUnfit) as exc:
            raise CommandError(str(exc)) from None
        except KeyboardInterrupt:
            raise CommandError("interrupted; run the same command again to continue") from None
        added, skipped = memory_bootstrap.harvest(evaluation)
        self.stdout.write(self.style.SUCCESS(
            f"Added {added} memories from runs that reached the right verdict ({skipped} skipped: wrong verdict or already "
            f"in the bank); they are marked for review in their provenance. Export them with: manage.py memory_bank export"))
