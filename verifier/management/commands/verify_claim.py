"""``manage.py verify_claim "Marie Curie was born in a city that lies in Poland."`` — verify a claim in plain
language: print its pseudo-subgraph, how each unknown was resolved, each part's run, and the claim's verdict."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from verifier.agent.loop import MODES
from verifier.claims.pipeline import ClaimError, decompose_claim, outcome, part_text, start_part_runs, submit_claim
from verifier.confidence import Unweighed, require_weighing
from verifier.models import Claim, KnowledgeGraph, Run
from verifier.runner import execute_run
from verifier.structure.training import TrainingError, wait_for_model
from verifier.wiring import build_llm

CLAIM_MODES = tuple(m for m in MODES if m in ("agent", "reading", "evidence", "kge", "rules"))


class Command(BaseCommand):
    help = "Verify a claim in plain language: pseudo-subgraph, resolution, one run per part, the claim's verdict."

    def add_arguments(self, parser):
        parser.add_argument("claim")
        parser.add_argument("--kg", default="codex-s")
        parser.add_argument("--mode", choices=CLAIM_MODES, default="agent", help="how each part is verified")
        parser.add_argument("--rerun", action="store_true", help="verify parts that already have a verdict again")

    def handle(self, *args, **options):
        kg = KnowledgeGraph.objects.filter(name=options["kg"]).first()
        if kg is None or kg.version == 0:
            raise CommandError(f"the KG {options['kg']!r} is not loaded; run manage.py load_kg first")
        try:  # before the model writes the claim as triples, which takes a while
            require_weighing(kg.pk, options["mode"])
        except Unweighed as exc:
            raise CommandError(str(exc)) from None
        from kgv_web.embedded_llm import provide_local_llm

        provide_local_llm()  # no LLM_BASE_URL: the embedded local model, stopped when this command ends
        llm = build_llm()
        try:
            claim = submit_claim(kg=kg, text=options["claim"], source="manage.py verify_claim")
        except ClaimError as exc:
            raise CommandError(str(exc)) from None
        claim = decompose_claim(claim, llm)
        if claim.status in (Claim.Status.FAILED, Claim.Status.REFUSED):
            raise CommandError(f"claim {claim.pk} {claim.status}: {claim.error}")
        self.stdout.write(f"Claim {claim.pk} on {kg.name}: {claim.text}\nPseudo-subgraph ({claim.model}):")
        for line in claim.written.splitlines():
            self.stdout.write(f"  {line}")
        for unknown, found in claim.resolution.items():
            candidates = ", ".join(f"{label} ({score:.2f})" for _, label, score in found["candidates"]) or "none"
            self.stdout.write(f"{unknown} → {found['label'] or 'no entity of the KG'}; candidates: {candidates}")
        mode = options["mode"]
        try:  # the parts' verdicts rest on the KG's structural model: waited for, or trained here
            wait_for_model(kg, log=self.stdout.write)
        except TrainingError as exc:
            raise CommandError(f"claim {claim.pk}: {exc}") from None
        for run in start_part_runs(claim, config={"mode": mode}, queue=False, rerun=options["rerun"]):
            run = execute_run(run.pk, llm=None if mode != "agent" else llm, await_structure=False)
            status = run.get_verdict_display() if run.status == Run.Status.SUCCEEDED else f"{run.status}: {run.error}"
            self.stdout.write(f"Run {run.pk} ({run.task.head.label} — {run.task.relation.label} — {run.task.tail.label}): {status}")
        for row in claim.subgraph:
            if row["part"] is None:
                self.stdout.write(f"Unresolved: {part_text(row)}")
        verdict = outcome(claim)
        confidence = f"confidence {verdict.confidence:.2f}" if verdict.confidence is not None else "confidence unknown"
        self.stdout.write(self.style.SUCCESS(f"\nClaim verdict: {verdict.verdict.title()} ({confidence})\n{verdict.justification}"))
