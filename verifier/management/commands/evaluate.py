"""``manage.py evaluate --benchmark codex-s --n 100 --mode agent`` — verify a benchmark through Celery,
with a progress bar; resumable (``--resume ID``, or the same command again); results stored as an
evaluation linked to its runs, optionally written as JSON, Markdown and charts (``--out``)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from verifier import confidence
from verifier.agent.config import parse_ablations
from verifier.agent.loop import MODEL_FREE_MODES, MODES
from verifier.agent.weighing import WEIGHED_MODES
from verifier.benchmarks.datasets import TYPE_SCHEMES, BenchmarkError
from verifier.claims import evaluation as claims_evaluation
from verifier.errors import ApplicationError
from verifier.evaluation import reports
from verifier.evaluation.driver import STOPPED_NOTE, EvaluationError, EvaluationSpec, drive, prepare, supersede_orphans
from verifier.evaluation.workers import WorkerUnfit, worker_pool
from verifier.kg.loader import ImportRejected
from verifier.management.lookup import find_evaluation
from verifier.models import Evaluation, KnowledgeGraph
from verifier.structure.training import TrainingError, wait_for_model
from verifier.wiring import build_llm


def headline(evaluation: Evaluation) -> str:
    figures = evaluation.metrics
    leaks = figures["leakage"]["runs_with_query_triple"]
    return (f"{evaluation.label} on {reports.benchmark_title(evaluation)}: accuracy {reports.fmt(figures['accuracy'])}%, "
            f"F1 {reports.fmt(figures['f1'])}, P {reports.fmt(figures['precision'])}, R {reports.fmt(figures['recall'])} "
            f"over {figures['n']} verifications; answer rate {reports.fmt(figures['answer_rate'])}%; "
            f"{figures['failed_runs']} failed run(s); runs that saw the query triple: {leaks}{_confidence(figures)}")


def _confidence(figures: dict) -> str:
    """The calibration and the share of verdicts confident enough to accept unread, when runs state a confidence."""
    calibration = figures.get("calibration")
    if not calibration:
        return ""
    line = f"\nECE {reports.fmt(calibration['ece'], 'ratio')} over {calibration['n']} verdicts with a confidence"
    for row in calibration.get("selective") or []:
        if row["threshold"] == 0.9 and row["n"]:
            line += (f"; confidence ≥ 0.90: {reports.fmt(row['coverage'])}% of verifications, {reports.fmt(row['accuracy'])}% "
                     f"right ({reports.fmt(row['low'])}–{reports.fmt(row['high'])})")
    return line


class Command(BaseCommand):
    help = "Evaluate a configuration of the agent (or a baseline) on a benchmark; resumable."

    def add_arguments(self, parser):
        parser.add_argument("--benchmark", help="codex-s | fb15k-237 (validation splits) | codex-s-test | fb15k-237-test "
                                                "(test splits, where present) | a CSV/TSV file of triples (with --kg) | "
                                                "a claims .jsonl (with --kg; manage.py claims_benchmark writes one)")
        parser.add_argument("--kg", help="the KG of a benchmark file (default: the dataset's own)")
        parser.add_argument("--n", type=int, default=100, help="labelled triples to draw (half true, half false)")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--mode", choices=MODES, default="agent")
        parser.add_argument("--ablate", default="", help="comma-separated parts switched off: memory, planning, kg-tools, "
                            "external-tools, structural-tools (the evidence and reading modes: the last three)")
        parser.add_argument("--repeats", type=int, default=1, help="verifications of each triple (reliability)")
        parser.add_argument("--concurrency", type=int, default=None, help="runs in flight at once (default 1, or as before)")
        parser.add_argument("--abstain", action="store_true", help="allow 'Not enough evidence'")
        parser.add_argument("--t-max", type=int, default=None)
        parser.add_argument("--profile", choices=["paper", "compact"], default=None,
                            help="the agent's profile (default: KGV_AGENT_PROFILE; compact on the embedded model)")
        parser.add_argument("--samples", type=int, default=None, help="self-consistency samples (k)")
        parser.add_argument("--types", choices=TYPE_SCHEMES, default="auto", help="fine-grained types for negatives")
        parser.add_argument("--name", help="the evaluation's name (default: from its parameters)")
        parser.add_argument("--for-fit", action="store_true", help="the runs are data for a confidence model's fit "
                            "(manage.py calibrate --evaluations): the evidence and reading modes go ahead with no model in force")
        parser.add_argument("--suite", default="", help="group this evaluation with others in one results table")
        parser.add_argument("--resume", metavar="ID", help="continue the evaluation with this id or name")
        parser.add_argument("--force", action="store_true", help="take over from a driver that looks alive")
        parser.add_argument("--out", type=Path, help="write results.json, results.md and charts here")
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args, **options):
        if (options["benchmark"] or "").endswith(".jsonl"):
            return claims_command(self, options)
        if options["resume"]:
            evaluation = find_evaluation(options["resume"])
            self.stdout.write(f"Resuming evaluation #{evaluation.pk} {evaluation.name}")
        else:
            evaluation = self._prepare(options)
        concurrency = options["concurrency"] or evaluation.concurrency
        if evaluation.mode in WEIGHED_MODES and (warning := confidence.unweighed_warning(evaluation.kg_id)):
            self.stdout.write(self.style.WARNING(warning))
        try:
            wait_for_model(evaluation.kg, log=self.stdout.write)
            with worker_pool(concurrency, log=self.stdout.write, needs_model=evaluation.mode not in MODEL_FREE_MODES):
                drive(evaluation, concurrency=concurrency, progress=not options["no_progress"], force=options["force"],
                      log=self.stdout.write)
        except (EvaluationError, TrainingError, WorkerUnfit) as exc:
            raise CommandError(str(exc)) from None
        except KeyboardInterrupt:
            # Ctrl-C or SIGTERM: the worker this command started has stopped by now; a run it held would
            # otherwise stay "running" with nobody running it.
            stopped = supersede_orphans(evaluation, note=STOPPED_NOTE)
            left = f"; {stopped} unfinished run(s) cancelled" if stopped else ""
            raise CommandError(f"interrupted{left}; continue with: manage.py evaluate --resume {evaluation.pk}") from None
        evaluation.refresh_from_db()
        self.stdout.write(self.style.SUCCESS(headline(evaluation)))
        self.stdout.write(f"Results: /evaluations/{evaluation.pk}/")
        if options["out"]:
            written = reports.write_reports([evaluation], options["out"], title=f"Evaluation {evaluation.name}")
            self.stdout.write(f"Wrote {len(written)} files under {options['out']}")

    def _prepare(self, options) -> Evaluation:
        if not options["benchmark"]:
            raise CommandError("give --benchmark (codex-s, fb15k-237 or a file) or --resume ID")
        try:
            spec = EvaluationSpec(
                benchmark=options["benchmark"], kg_name=options["kg"], n=options["n"], seed=options["seed"],
                mode=options["mode"], ablations=parse_ablations(options["ablate"]), repeats=options["repeats"],
                concurrency=options["concurrency"] or 1, abstain=options["abstain"], t_max=options["t_max"],
                samples=options["samples"], types=options["types"], name=options["name"], suite=options["suite"],
                profile=options["profile"], for_fit=options["for_fit"])
            evaluation, created = prepare(spec)
        except (EvaluationError, BenchmarkError, ImportRejected, ValueError) as exc:
            raise CommandError(str(exc)) from None
        verb = "Created" if created else "Resuming"
        notes = evaluation.dataset
        self.stdout.write(f"{verb} evaluation #{evaluation.pk} {evaluation.name}: {evaluation.label}, "
                          f"{notes.get('drawn')} triples ({notes.get('positives')} true) from {evaluation.benchmark}, "
                          f"{evaluation.repeats} repeat(s)")
        if notes.get("drawn", 0) < notes.get("requested", 0):
            self.stdout.write(self.style.WARNING(f"only {notes['drawn']} of {notes['requested']} triples could be drawn: {notes}"))
        return evaluation


CLAIM_MODES = ("agent", "reading", "evidence", "kge", "rules", "zero-shot")


def claims_command(command: BaseCommand, options) -> None:
    """``evaluate --benchmark claims.jsonl --kg codex-s``: claim verification (or the zero-shot baseline) on a
    claims file, in this process, resumable (verifier/claims/evaluation.py)."""
    if options["mode"] not in CLAIM_MODES:
        raise CommandError(f"claims are evaluated with --mode {' | '.join(CLAIM_MODES)}")
    kg = KnowledgeGraph.objects.filter(name=options["kg"] or "").first()
    if kg is None or kg.version == 0:
        raise CommandError("a claims benchmark needs --kg, a loaded KG")
    try:  # before any claim is written as triples by the model
        confidence.require_weighing(kg.pk, options["mode"])
    except confidence.Unweighed as exc:
        raise CommandError(str(exc)) from None
    from kgv_web.embedded_llm import provide_local_llm

    provide_local_llm()  # every mode asks the model: for the pseudo-subgraph, or (zero-shot) for the verdict
    path = Path(options["benchmark"])

    def progress(index: int, total: int, result) -> None:
        if not options["no_progress"]:
            mark = "✓" if result.correct else "✗"
            command.stdout.write(f"[{index}/{total}] line {result.line} {result.category or '-'}: {result.predicted} "
                                 f"(expected {'supported' if result.label else 'refuted'}) {mark} {result.seconds:.0f} s")
    def structure_ready(parts: list[tuple[int, int, int]]) -> None:
        if options["mode"] in MODEL_FREE_MODES:  # they rest on the structural model: train one if there is none
            wait_for_model(kg, log=command.stdout.write)
    try:
        results = claims_evaluation.evaluate(kg, path, mode=options["mode"], llm=build_llm(), progress=progress,
                                             before_runs=structure_ready, log=command.stdout.write)
    except (ApplicationError, TrainingError) as exc:
        raise CommandError(str(exc)) from None
    figures = claims_evaluation.summary(results)
    command.stdout.write(claims_evaluation.table(figures, title=f"{options['mode']} on {path.name} ({kg.name})"))
    if options["out"]:
        options["out"].mkdir(parents=True, exist_ok=True)
        target = options["out"] / f"claims-{options['mode']}.json"
        target.write_text(json.dumps({"benchmark": str(path), "kg": kg.name, "mode": options["mode"], **figures,
                                      "claims": [asdict(r) for r in results]}, indent=2))
        command.stdout.write(f"Wrote {target}")
