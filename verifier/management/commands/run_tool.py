"""``manage.py run_tool codex-s KG_Path "Albert Einstein" "German Empire"`` — call one tool as the agent
would and print its observation (and, with --items, the structured evidence items)."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from verifier.management.lookup import kg_named
from verifier.tools.registry import available, describe
from verifier.wiring import build_toolbox, query_triple


class Command(BaseCommand):
    help = "Call a verification tool on a loaded KG and print the observation the model would see."

    def add_arguments(self, parser):
        parser.add_argument("kg", help="name of a loaded KG")
        parser.add_argument("tool", nargs="?", help="tool name; omit to list the tools")
        parser.add_argument("arguments", nargs="*", help="positional tool arguments")
        parser.add_argument("--verifying", nargs=3, metavar=("HEAD", "RELATION", "TAIL"),
                            help="the triple under verification (withheld from KG results)")
        parser.add_argument("--items", action="store_true", help="also print the evidence items as JSON")
        parser.add_argument("--no-cache", action="store_true", help="do not answer from the shared tool cache")

    def handle(self, *args, **options):
        kg = kg_named(options["kg"])
        if not options["tool"]:
            self.stdout.write(describe(available()))
            return
        query = None
        if options["verifying"]:
            try:
                query = query_triple(kg, *options["verifying"])
            except ValueError as exc:
                raise CommandError(str(exc)) from None
        result = build_toolbox(kg, query, shared_cache=not options["no_cache"]).call(options["tool"], options["arguments"])
        self.stdout.write(result.text)
        if options["items"]:
            self.stdout.write(json.dumps([item.to_dict() for item in result.items], indent=2, ensure_ascii=False))
        if not result.ok:
            raise CommandError("the tool could not answer (see above)")
