"""``manage.py audit_labels EVALUATION --write FILE`` draws a blind sample of an evaluation's negatives for a curator
to judge; ``--judged FILE`` sets the judgements against the evaluation's verdicts (verifier.evaluation.label_audit).
Changes nothing stored."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from verifier.evaluation import label_audit
from verifier.management.lookup import find_evaluation


class Command(BaseCommand):
    help = "How many of an evaluation's negatives are really false: draw a blind sample to judge, or report on a judged one."

    def add_arguments(self, parser):
        parser.add_argument("evaluation", help="the evaluation's id or name")
        action = parser.add_mutually_exclusive_group(required=True)
        action.add_argument("--write", type=Path, metavar="FILE",
                            help="append a random sample of the negatives FILE lacks, blank for judging (TSV)")
        action.add_argument("--judged", type=Path, metavar="FILE", help="report on a judged audit file")
        parser.add_argument("--sample", type=int, default=80, help="negatives to draw with --write (default 80)")
        parser.add_argument("--seed", type=int, default=2026, help="the draw's seed (default 2026)")

    def handle(self, *args, **options):
        evaluation = find_evaluation(options["evaluation"])
        if options["sample"] < 1:
            raise CommandError("--sample must be at least 1")
        try:
            if options["write"]:
                self._write(evaluation, options["write"], options["sample"], options["seed"])
            else:
                if not options["judged"].is_file():
                    raise CommandError(f"no file {options['judged']}")
                result = label_audit.audit(evaluation, label_audit.read_judged(options["judged"]))
                self.stdout.write(label_audit.audit_text(result))
        except label_audit.AuditFileError as error:
            raise CommandError(str(error)) from None

    def _write(self, evaluation, path: Path, size: int, seed: int) -> None:
        if not path.parent.is_dir():
            raise CommandError(f"no folder {path.parent} to write {path.name} in")
        drawn = label_audit.write_sample(evaluation, path, size=size, seed=seed)
        if not drawn.written:
            raise CommandError(f"{path} already holds all {drawn.negatives} negatives of {evaluation.name} that have a run")
        after = f" after the {drawn.held} it held" if drawn.held else ""
        self.stdout.write(f"{drawn.written} of {drawn.negatives} negatives of {evaluation.name} written to {path}{after}: "
                          f"mark each row's judgement ({' / '.join(label_audit.JUDGEMENTS)}) and reason, then run "
                          f"manage.py audit_labels {evaluation.name} --judged {path}")
