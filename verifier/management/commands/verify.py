"""``manage.py verify "Albert Einstein" "country of citizenship" "German Empire"`` — investigate one
triple and print each step as it happens (plan, thoughts, actions, observations, verdict)."""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand, CommandError

from verifier.agent.loop import MODEL_FREE_MODES, MODES
from verifier.models import KnowledgeGraph, Run, Step, VerificationTask
from verifier.runner import execute_run
from verifier.selectors import awaited_training
from verifier.services import start_run
from verifier.structure.training import TrainingError, wait_for_model
from verifier.wiring import query_triple, settle_config

LABELS = {"plan": "PLAN", "thought": "Thought", "action": "Action", "observation": "Observation", "verdict": "VERDICT"}


class Command(BaseCommand):
    help = "Verify one triple (ids or names) with the agent, printing every step live."

    def add_arguments(self, parser):
        parser.add_argument("head")
        parser.add_argument("relation")
        parser.add_argument("tail")
        parser.add_argument("--kg", default="codex-s")
        parser.add_argument("--mode", choices=MODES, default="agent")
        parser.add_argument("--t-max", type=int, default=None)
        parser.add_argument("--no-memory", action="store_true")
        parser.add_argument("--no-planning", action="store_true")
        parser.add_argument("--no-kg-tools", action="store_true")
        parser.add_argument("--no-external-tools", action="store_true")
        parser.add_argument("--no-structural-tools", action="store_true")
        parser.add_argument("--profile", choices=["paper", "compact"], help="default: compact on the embedded model")
        parser.add_argument("--abstain", action="store_true", help="allow 'Not enough evidence'")
        parser.add_argument("--queue", action="store_true", help="run on a Celery worker and follow it")

    def handle(self, *args, **options):
        kg = KnowledgeGraph.objects.filter(name=options["kg"]).first()
        if kg is None:
            raise CommandError(f"no KG named {options['kg']!r}; load one with manage.py load_kg")
        try:
            claim = query_triple(kg, options["head"], options["relation"], options["tail"])
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        task, _ = VerificationTask.objects.get_or_create(
            kg=kg, head=kg.entities.get(external_id=claim.head), relation=kg.relations.get(external_id=claim.relation),
            tail=kg.entities.get(external_id=claim.tail), defaults={"source": "manage.py verify"})
        config = {"mode": options["mode"], "use_memory": not options["no_memory"], "use_planning": not options["no_planning"],
                  "kg_tools": not options["no_kg_tools"], "external_tools": not options["no_external_tools"],
                  "structural_tools": not options["no_structural_tools"], "abstain": options["abstain"]}
        if options["profile"]:
            config["profile"] = options["profile"]
        if options["t_max"]:
            config["t_max"] = options["t_max"]
        what = (f"{claim.head_label} — {claim.relation_label} — {claim.tail_label} ({claim.head}, {claim.relation}, "
                f"{claim.tail}) on {kg.name}")
        if not options["queue"] and options["mode"] not in MODEL_FREE_MODES:
            # No LLM_BASE_URL: the embedded local model, stopped when this command ends. Started before the run is
            # created, whose configuration is settled against the model that will answer.
            from kgv_web.embedded_llm import provide_local_llm

            provide_local_llm()
        try:
            settled = settle_config(config)
            if not options["queue"] and settled.agent.uses_structure:
                self._structure_for(kg, task, what)
            run = start_run(task=task, config=settled, queue=options["queue"])
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"Run {run.pk}: verifying {what}\n")
        if options["queue"]:
            run = self._follow(run)
        else:
            run = execute_run(run.pk, on_step=self._print, await_structure=False)
        run.refresh_from_db()
        if run.status != Run.Status.SUCCEEDED:
            raise CommandError(f"run {run.pk} {run.status}: {run.error}")
        memories = ", ".join(f"#{m.entry_id} ({m.similarity:.2f})" for m in run.memories_used.all()) or "none"
        confidence = f"confidence {run.confidence:.2f}" if run.confidence is not None else "confidence not calibrated yet"
        elapsed = run.elapsed()
        seconds = elapsed.total_seconds() if elapsed is not None else 0
        self.stdout.write(self.style.SUCCESS(
            f"\nVerdict: {run.get_verdict_display()} ({confidence}{', disputed' if run.disputed else ''}) — "
            f"{run.prompt_tokens:,} prompt + {run.completion_tokens:,} completion tokens, {seconds:.0f} s, "
            f"${run.cost_usd}, model {run.model}; memories used: {memories}"))
        if run.disputed:
            self.stdout.write(run.assessment.get("disputed_reason", ""))

    def _structure_for(self, kg: KnowledgeGraph, task: VerificationTask, what: str) -> None:
        """Before the run is created: the KG's structural model, which the verdict rests on (waited for, or trained
        here; the network of the triple's fold never learnt it). A queued run left waiting meanwhile would be taken for lost and
        sent to a worker."""
        introduced = False

        def log(line: str) -> None:
            nonlocal introduced
            if not introduced:
                self.stdout.write(f"Verifying {what}:")
                introduced = True
            self.stdout.write(line)

        try:
            wait_for_model(kg, log=log)
        except TrainingError as exc:
            raise CommandError(f"{exc} (--no-structural-tools verifies without the structural model)") from None

    def _print(self, step: Step) -> None:
        body = step.content if len(step.content) < 2000 else step.content[:2000] + " …"
        timing = f" ({step.duration_ms} ms)" if step.duration_ms else ""
        self.stdout.write(f"[{step.seq}] {LABELS[step.kind]}{timing}: {body}")

    def _follow(self, run: Run) -> Run:
        seen, waiting_for = 0, None
        while True:
            for step in Step.objects.filter(run=run, seq__gt=seen).order_by("seq"):
                self._print(step)
                seen = step.seq
            run.refresh_from_db()
            if run.awaiting_model_id != waiting_for:  # said once per training it waits for
                waiting_for = run.awaiting_model_id
                if text := awaited_training(run):
                    self.stdout.write(text)
            if run.is_finished:
                return run
            time.sleep(0.3)
