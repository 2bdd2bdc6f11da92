"""``manage.py memory_bank export bank.json`` / ``import bank.json`` — move the memory bank between
installations (entries are re-embedded on import; identical entries are skipped)."""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from verifier.memory import bank


class Command(BaseCommand):
    help = "Export or import the memory bank of curated investigations (JSON)."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["export", "import"])
        parser.add_argument("path", type=Path)

    def handle(self, *args, **options):
        path: Path = options["path"]
        if options["action"] == "export":
            count = bank.export_bank(path)
            self.stdout.write(self.style.SUCCESS(f"Exported {count} memory entries to {path}"))
            return
        if not path.exists():
            raise CommandError(f"{path} does not exist")
        try:
            added, skipped = bank.import_bank(path)
        except (ValueError, KeyError, json.JSONDecodeError) as exc:
            raise CommandError(f"{path}: {exc}") from None
        self.stdout.write(self.style.SUCCESS(f"Imported {added} memory entries ({skipped} already present)"))
