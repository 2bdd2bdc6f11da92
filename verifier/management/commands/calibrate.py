"""``manage.py calibrate --evaluations NAME`` — fit the confidence of verdicts on labelled runs (an
evaluation's runs on a validation split, reviewers' decisions with ``--reviews``), then recompute the
confidence of finished runs. ``--kg NAME --calibration-triples`` labels runs first for a KG with none: the
evidence of its structural model's calibration triples (labelled triples, or its own facts and corruptions of
them), weighed.
``--export FILE`` / ``--import FILE`` move a fitted model between installations; ``--list`` shows the models
and which are in force and ``--activate ID`` puts an earlier one back in force."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from verifier import confidence, confidence_fitting
from verifier.evaluation.driver import EvaluationError
from verifier.evaluation.labelled import calibration_evaluation, drive_here
from verifier.evaluation.workers import WorkerUnfit
from verifier.management.lookup import find_evaluation, kg_named
from verifier.models import ConfidenceModel, Run
from verifier.structure.training import TrainingError, wait_for_model


def _against_in_force(cv: dict) -> str:
    """How the model in force when it was fitted weighed the same runs."""
    if cv.get("in_force_model") is None:
        return ""
    return (f" The model in force then (#{cv['in_force_model']}) weighs the same runs right {cv['in_force_accuracy']:.1%} of "
            f"the time at ECE {cv['in_force_ece']:.3f}.")


def _against_structural(cv: dict, previous: ConfidenceModel | None) -> str:
    """The structural probability alone on the same runs, and what to do when the weighing does not beat it."""
    if cv.get("structural_accuracy") is None:
        return ""
    line = (f" On its {cv['structural_runs']} runs with a structural probability, that probability alone is right "
            f"{cv['structural_accuracy']:.1%} of the time (the weighing {cv['weighed_accuracy_on_structural_runs']:.1%})")
    if cv["weighed_accuracy_on_structural_runs"] > cv["structural_accuracy"]:
        return line + "."
    line += ": the weighing adds nothing to it on these runs"
    return line + (f"; the model in force before can be put back with --activate {previous.pk}." if previous else ".")


class Command(BaseCommand):
    help = "Fit the verdict confidence model on labelled agent and evidence-mode runs and re-assess finished runs."

    def add_arguments(self, parser):
        parser.add_argument("--evaluations", default="", help="comma-separated evaluation names or ids whose runs are labelled")
        parser.add_argument("--reviews", action="store_true", help="also fit on reviewers' Correct/Incorrect decisions")
        parser.add_argument("--kg", help="fit for this KG only (default: one model for every KG)")
        parser.add_argument("--calibration-triples", action="store_true",
                            help="with --kg: first verify the structural model's calibration triples in the evidence mode "
                                 "(resumable) and fit on those runs too: a KG's own weighing before any is labelled")
        parser.add_argument("--concurrency", type=int, default=2, help="--calibration-triples: verifications at once")
        parser.add_argument("--no-progress", action="store_true")
        parser.add_argument("--no-reassess", action="store_true", help="do not recompute finished runs' confidence")
        parser.add_argument("--export", type=Path, metavar="FILE", help="write the fitted model (or, alone, the active one) as JSON")
        parser.add_argument("--import", dest="import_", type=Path, metavar="FILE",
                            help="activate a model written by --export: for its KG, or for every KG (their own models stand down)")
        parser.add_argument("--activate", type=int, metavar="ID",
                            help="put an earlier model back in force (for its KG, or for every KG) instead of fitting one")
        parser.add_argument("--list", action="store_true", help="list the confidence models and which are in force")

    def handle(self, *args, **options):
        kg = None
        if options["kg"]:
            kg = kg_named(options["kg"])
        if options["import_"]:
            return self._import(options["import_"], options["no_reassess"])
        if options["list"]:
            return self._list()
        if options["activate"] is not None:
            try:
                model = confidence.activate(options["activate"])
            except ValueError as exc:
                raise CommandError(str(exc)) from None
            self.stdout.write(self.style.SUCCESS(
                f"Activated confidence model #{model.pk} for {model.kg.name if model.kg else 'every KG'} ({model.source})."))
            if not options["no_reassess"]:
                self._reassess(Run.objects.filter(task__kg=model.kg) if model.kg else Run.objects.all())
            return
        names = [n.strip() for n in options["evaluations"].split(",") if n.strip()]
        if options["calibration_triples"]:
            names.append(self._calibration_triples(kg, options))
        if not names and not options["reviews"] and options["export"]:
            model = confidence.active_model(kg.pk if kg else None)
            if model is None:
                raise CommandError("no active confidence model to export: fit one with --evaluations or --reviews")
            confidence.export_model(model, options["export"])
            self.stdout.write(f"Wrote confidence model #{model.pk} to {options['export']}.")
            return
        if not names and not options["reviews"]:
            raise CommandError("give --evaluations NAME[,NAME] and/or --reviews: the labelled runs to fit on")
        names = [find_evaluation(key).name for key in names]
        source = ", ".join([*(f"evaluation {n}" for n in names), *(["reviewed runs"] if options["reviews"] else [])])
        previous = confidence.active_model(kg.pk if kg else None)
        try:
            pairs = confidence_fitting.labelled_runs(evaluations=names, reviews=options["reviews"], kg=kg)
            fitted = confidence_fitting.fit(pairs, kg=kg, source=source)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        cv = fitted.cross_validated
        weights = ", ".join(f"{n} {c:+.2f}" for n, c in zip(fitted.model.features, fitted.model.coefficients, strict=True))
        if cv:
            agent = (f"; on its {cv['agent_runs']} agent runs {cv['agent_combined_accuracy']:.1%}, where the model's own answers "
                     f"were right {cv['answer_accuracy']:.1%}" if cv["agent_runs"] else "")
            figures = (f"Cross-fitted over {cv['folds']} folds (each fitted triple is weighed by the weights fitted without it): "
                       f"the weighed evidence is right {cv['combined_accuracy']:.1%} of the time at ECE {cv['ece']:.3f}{agent}."
                       f"{_against_structural(cv, previous)}{_against_in_force(cv)}")
        else:
            figures = "Too few true or false triples for folds: its triples are recorded as fitted, and no evaluation draws them."
        self.stdout.write(self.style.SUCCESS(
            f"Confidence model #{fitted.model.pk} fitted on {fitted.n} labelled runs ({source}). {figures}\n"
            f"  weights: {weights}; intercept {fitted.model.intercept:+.2f}"))
        if options["export"]:
            confidence.export_model(fitted.model, options["export"])
            self.stdout.write(f"Wrote it to {options['export']}.")
        if not options["no_reassess"]:
            self._reassess(Run.objects.filter(task__kg=kg) if kg else Run.objects.all())

    def _calibration_triples(self, kg, options) -> str:
        """The evidence-mode evaluation of the KG's structural calibration triples (continued if it exists)."""
        if kg is None:
            raise CommandError("--calibration-triples needs --kg NAME: the KG whose calibration triples are verified")
        try:
            model = wait_for_model(kg, log=self.stdout.write)
            if model is None:
                raise CommandError(f"{kg.name} is a SPARQL endpoint: it has no structural model to take triples from")
            if not model.calibrated_at:
                raise CommandError(f"{model.description} has no calibration: manage.py train_kge {kg.name} --recalibrate")
            evaluation = drive_here(calibration_evaluation(model, concurrency=options["concurrency"]),
                                    concurrency=options["concurrency"], progress=not options["no_progress"], log=self.stdout.write)
        except (EvaluationError, TrainingError, ValueError, WorkerUnfit) as exc:
            raise CommandError(str(exc)) from None
        except KeyboardInterrupt:
            raise CommandError("interrupted; run the same command again to continue") from None
        return evaluation.name

    def _import(self, path: Path, no_reassess: bool) -> None:
        try:
            model = confidence.import_model(path)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(self.style.SUCCESS(
            f"Activated confidence model #{model.pk} for {model.kg.name if model.kg else 'every KG'} ({model.source})."))
        if not no_reassess:
            self._reassess(Run.objects.filter(task__kg=model.kg) if model.kg else Run.objects.all())

    def _list(self) -> None:
        for model in ConfidenceModel.objects.select_related("kg").order_by("pk"):
            cv = (model.metrics or {}).get("cross_validated") or {}
            figures = (f", cross-validated {cv['combined_accuracy']:.1%} at ECE {cv['ece']:.3f}"
                       if cv.get("combined_accuracy") is not None else "")
            self.stdout.write(f"#{model.pk} {'active' if model.active else 'inactive'}, {model.kg.name if model.kg else 'every KG'}: "
                              f"{(model.metrics or {}).get('n', '?')} runs{figures}; {model.source}")

    def _reassess(self, runs) -> None:
        self.stdout.write(f"Re-assessed {confidence.reassess(runs)} finished weighed runs (agent and evidence mode).")
