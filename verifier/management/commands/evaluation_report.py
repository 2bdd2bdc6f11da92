"""``manage.py evaluation_report ID`` — print (and with ``--out`` write) an evaluation's results;
``--compare A B`` sets two side by side; ``--suite NAME`` gives a suite's full table."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from verifier.evaluation import reports
from verifier.evaluation.driver import refresh_metrics
from verifier.management.lookup import find_evaluation
from verifier.models import Evaluation


class Command(BaseCommand):
    help = "Results of evaluations: one, two side by side (--compare), or a suite's table (--suite)."

    def add_arguments(self, parser):
        parser.add_argument("evaluations", nargs="*", metavar="ID", help="evaluation ids or names")
        parser.add_argument("--compare", action="store_true", help="set the two evaluations given side by side")
        parser.add_argument("--suite", help="all evaluations of this suite")
        parser.add_argument("--recompute", action="store_true", help="recompute finished evaluations' metrics from their runs")
        parser.add_argument("--out", type=Path, help="write results.json, results.md and charts here")

    def handle(self, *args, **options):
        evaluations = [find_evaluation(key) for key in options["evaluations"]]
        if options["suite"]:
            evaluations += reports.suite_evaluations(options["suite"])
        if not evaluations:
            raise CommandError("name at least one evaluation, or --suite NAME")
        if options["recompute"]:
            for evaluation in evaluations:
                if evaluation.status == Evaluation.Status.FINISHED:
                    refresh_metrics(evaluation)
        if options["compare"]:
            if len(evaluations) != 2:
                raise CommandError("--compare needs exactly two evaluations")
            self.stdout.write(reports.comparison_markdown(*evaluations))
        else:
            self.stdout.write(reports.results_table(evaluations) + "\n\n" + reports.efficiency_table(evaluations))
        if options["out"]:
            title = f"Results of suite {options['suite']}" if options["suite"] else "Evaluation results"
            written = reports.write_reports(evaluations, options["out"], title=title)
            if options["compare"]:
                (options["out"] / "comparison.md").write_text(reports.comparison_markdown(*evaluations))
            self.stdout.write(f"Wrote {len(written)} files under {options['out']}")
