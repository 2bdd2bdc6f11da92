"""``manage.py evaluate_suite --n 100`` — the papers' full results table in one command: on each
benchmark (CoDEx-S valid pairs, FB15k-237 valid with type-constrained negatives) the agent, each
ablation and each baseline of the same model, then the tables and charts under ``--out``.

Every evaluation is named from the suite and its parameters, so running the same command again
continues where it stopped (finished evaluations are kept, unfinished ones resumed)."""

from __future__ import annotations

from pathlib import Path

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from verifier import confidence
from verifier.agent.loop import MODEL_FREE_MODES
from verifier.benchmarks.datasets import DATASETS, BenchmarkError
from verifier.evaluation import reports
from verifier.evaluation.configs import SUITE
from verifier.evaluation.driver import EvaluationError, EvaluationSpec, drive, prepare
from verifier.evaluation.workers import WorkerUnfit, worker_pool
from verifier.kg.loader import ImportRejected
from verifier.management.commands.evaluate import headline
from verifier.memory.bank import seed_if_empty
from verifier.models import KnowledgeGraph
from verifier.structure.training import TrainingError, wait_for_model


class Command(BaseCommand):
    help = "Run the agent, its ablations and the baselines on the benchmarks and write the results table."

    def add_arguments(self, parser):
        parser.add_argument("--benchmarks", default="codex-s,fb15k-237",
                            help=f"comma-separated: {', '.join(DATASETS)} or CSV/TSV files of triples (with --kg)")
        parser.add_argument("--kg", help="the KG of benchmark files")
        parser.add_argument("--configs", default=",".join(c.slug for c in SUITE),
                            help="comma-separated configurations (default: all rows of the table)")
        parser.add_argument("--n", type=int, default=100)
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--repeats", type=int, default=1)
        parser.add_argument("--concurrency", type=int, default=1)
        parser.add_argument("--t-max", type=int, default=None, help="agent step limit (default KGV_T_MAX, 10)")
        parser.add_argument("--suite", help="name of the suite (default: table-n<N>-s<SEED>)")
        parser.add_argument("--out", type=Path, default=Path("reports/evaluation"), help="where to write the table and charts")
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args, **options):
        benchmarks = [b.strip() for b in options["benchmarks"].split(",") if b.strip()]
        unknown = [b for b in benchmarks if b not in DATASETS and not Path(b).is_file()]
        by_slug = {c.slug: c for c in SUITE}
        configs = [c.strip() for c in options["configs"].split(",") if c.strip()]
        unknown += [c for c in configs if c not in by_slug]
        if unknown:
            raise CommandError(f"unknown benchmark or configuration: {', '.join(unknown)} "
                               f"(benchmarks: {', '.join(DATASETS)} or a file; configurations: {', '.join(by_slug)})")
        if any(b not in DATASETS for b in benchmarks) and not options["kg"]:
            raise CommandError("a benchmark file needs --kg: the KG its triples belong to")
        t_max = options["t_max"]
        suite = options["suite"] or f"table-n{options['n']}-s{options['seed']}" + (f"-t{t_max}" if t_max else "")
        for benchmark in benchmarks:
            kg_name = DATASETS[benchmark].kg_name if benchmark in DATASETS else options["kg"]
            if benchmark in DATASETS:
                self._ensure_loaded(kg_name)
            try:
                wait_for_model(KnowledgeGraph.objects.get(name=kg_name), log=self.stdout.write)
            except TrainingError as exc:
                raise CommandError(str(exc)) from None
        if seeded := seed_if_empty():  # the "− memory" row means nothing against an empty bank
            self.stdout.write(seeded)
        for model in confidence.seed_shipped_models():  # the default's verdicts are weighed ones, as `make demo` has them
            self.stdout.write(confidence.seeded_line(model))
        evaluations = []
        try:
            needs_model = any(by_slug[slug].mode not in MODEL_FREE_MODES for slug in configs)
            with worker_pool(options["concurrency"], log=self.stdout.write, needs_model=needs_model):
                # Row by row of the table (each configuration on every benchmark), so an interrupted suite
                # leaves complete rows.
                for slug in configs:
                    configuration = by_slug[slug]
                    for benchmark in benchmarks:
                        spec = EvaluationSpec(benchmark=benchmark, kg_name=None if benchmark in DATASETS else options["kg"],
                                              n=options["n"], seed=options["seed"], mode=configuration.mode,
                                              ablations=configuration.ablations, repeats=options["repeats"],
                                              concurrency=options["concurrency"], t_max=t_max, suite=suite)
                        evaluation, _ = prepare(spec)
                        self.stdout.write(f"— {evaluation.label} on {benchmark} (#{evaluation.pk} {evaluation.name})")
                        drive(evaluation, progress=not options["no_progress"], log=self.stdout.write)
                        evaluation.refresh_from_db()
                        self.stdout.write(headline(evaluation))
                        evaluations.append(evaluation)
        except (EvaluationError, BenchmarkError, ImportRejected, WorkerUnfit) as exc:
            raise CommandError(str(exc)) from None
        except KeyboardInterrupt:
            raise CommandError("interrupted; run the same command again to continue") from None
        written = reports.write_reports(evaluations, options["out"], title=f"Results of suite {suite}")
        self.stdout.write(self.style.SUCCESS(f"\n{reports.results_table(evaluations)}\n\nWrote {len(written)} files under "
                                             f"{options['out']}; workbench: /evaluations/suite/{suite}/"))

    def _ensure_loaded(self, kg_name: str) -> None:
        kg = KnowledgeGraph.objects.filter(name=kg_name).first()
        if kg is None or kg.version == 0:
            self.stdout.write(f"Loading {kg_name} (first use only)…")
            call_command("load_kg", kg_name)
