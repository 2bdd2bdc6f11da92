"""``manage.py train_kge codex-s`` — train, validate and calibrate the KG's structural model (one network per
fold of its triples), with a progress bar (``--queue``: on a Celery worker instead, as ``load_kg`` does; ``--recalibrate``: refit the
ready model's calibration only, its rules mined again first, in seconds; ``--restore N``: make model N, which
the ready one replaced, ready again, recalibrated)."""

from __future__ import annotations

import json
import signal

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from verifier import confidence_own
from verifier.management.lookup import kg_named
from verifier.models import Entity, KnowledgeGraph, StructuralModel, Triple
from verifier.selectors import model_summary
from verifier.services import release_awaiting
from verifier.structure import kge
from verifier.structure.fitting import calibrate_structural, calibration_line
from verifier.structure.folds import DEFAULT_FOLDS as FOLDS_DEFAULT
from verifier.structure.training import (
    TrainingError,
    cut_short_warning,
    request_training,
    restorable,
    restore,
    train,
)


class Command(BaseCommand):
    help = "Train the KG-embedding model of a loaded KG (PyKEEN), one network per fold of its triples, and calibrate it."

    def add_arguments(self, parser):
        parser.add_argument("kg", help="name of a loaded KG")
        parser.add_argument("--queue", action="store_true", help="train on a Celery worker instead of here")
        parser.add_argument("--config", default="{}", help='KGE settings as JSON, e.g. \'{"dim": 128, "max_minutes": 5}\' '
                                                           '(max_minutes: the budget of each network)')
        parser.add_argument("--folds", type=int, default=FOLDS_DEFAULT, help="networks, each trained without one fold")
        parser.add_argument("--no-progress", action="store_true")
        parser.add_argument("--recalibrate", action="store_true",
                            help="refit the calibration of the KG's ready model (its rules mined again) without retraining it")
        parser.add_argument("--restore", type=int, metavar="MODEL_ID",
                            help="make the model the ready one replaced current again (a retraining that did worse)")

    def handle(self, *args, **options):
        kg = kg_named(options["kg"], loaded=True)
        if kg.kind != KnowledgeGraph.Kind.LOCAL:
            raise CommandError(f"{kg.name} is a SPARQL endpoint: structural models are trained on local KGs only")
        if options["recalibrate"]:
            self._recalibrate(kg)
            return
        if options["restore"] is not None:
            self._restore(kg, options["restore"])
            return
        if options["folds"] < 2:
            raise CommandError("--folds: at least 2 (each network learns every fold but its own)")
        try:
            overrides = json.loads(options["config"])
            config = kge.KGEConfig.from_dict({**self._defaults(kg, options["folds"]), **overrides})  # never the ready model's
        except (ValueError, TypeError) as exc:
            raise CommandError(f"--config: {exc}") from None
        if options["queue"]:
            row = request_training(kg, reason="manage.py train_kge", config=config.to_dict(), folds=options["folds"])
            if row is None:
                raise CommandError(f"a structural model of {kg.name} is already queued or training; see /health/")
            self.stdout.write(f"Queued structural model #{row.pk} of {kg.name} v{kg.version}; progress at /health/")
            return
        bar = tqdm(total=1000, desc=f"{kg.name}", disable=options["no_progress"], bar_format="{l_bar}{bar}| {elapsed} {postfix}")

        def report(fraction: float, stage: str) -> None:
            bar.n = int(fraction * 1000)
            bar.set_postfix_str(stage, refresh=True)

        # SIGTERM (`kill`) stops a foreground training as Ctrl-C does: the model's row is marked failed, not left training
        previous_handler = signal.signal(signal.SIGTERM, signal.default_int_handler)
        try:
            row = train(kg, config=config, report=report, folds=options["folds"])
        except TrainingError as exc:
            raise CommandError(str(exc)) from None
        except KeyboardInterrupt:
            raise CommandError(f"stopped: the structural model of {kg.name} being trained is marked failed") from None
        finally:
            signal.signal(signal.SIGTERM, previous_handler)
            bar.close()
            for model in StructuralModel.objects.filter(kg=kg).exclude(status__in=[StructuralModel.Status.QUEUED,
                                                                                    StructuralModel.Status.TRAINING]):
                release_awaiting(model.pk)
        metrics = row.metrics
        dataset, unranked = metrics.get("dataset_validation"), metrics.get("dataset_validation_unranked")
        calibration = metrics.get("calibration", {})
        self.stdout.write(self.style.SUCCESS(
            f"Structural model #{row.pk} of {kg.name} v{row.kg_version} ready: {row.config['kge']['model']} "
            f"dim {row.config['kge']['dim']}, {row.folds} networks of {metrics['epochs']:g} epochs on average in "
            f"{metrics['training_seconds'] / 60:.1f} min "
            f"({metrics['stopped_because']}); held-out MRR {metrics['validation']['mrr']:.3f}"
            + (f", dataset validation MRR {dataset['mrr']:.3f} (Hits@10 {dataset['hits_at_10']:.3f}"
               + (f"; {unranked['mrr']:.3f} on the {unranked['triples']:,} that early stopping never ranked" if unranked else "")
               + ")" if dataset else "")
            + "; " + calibration_line(calibration)))
        if warning := cut_short_warning(row):
            self.stdout.write(self.style.WARNING(warning))
        previous = restorable(kg)
        if previous is not None:
            self.stdout.write(f"It replaces model #{previous}; to undo: manage.py train_kge {kg.name} --restore {previous}")
        self._weighing_hint(kg)

    def _recalibrate(self, kg: KnowledgeGraph) -> None:

        row = StructuralModel.objects.filter(kg=kg, status=StructuralModel.Status.READY).order_by("-pk").first()
        if row is None:
            raise CommandError(f"{kg.name} has no ready structural model to recalibrate; train one: manage.py train_kge {kg.name}")
        try:
            metrics = calibrate_structural(row)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(self.style.SUCCESS(f"Structural model #{row.pk} of {kg.name} recalibrated: {calibration_line(metrics)}"))
        self._weighing_hint(kg)

    def _weighing_hint(self, kg: KnowledgeGraph) -> None:
        """A KG weighed by the model for every KG (fitted on another KG's evidence) can have one of its own."""
        if confidence_own.wanted(kg):
            self.stdout.write(f"Verdicts on {kg.name} are weighed by the confidence model for every KG; to fit one on its own "
                              f"evidence (an evidence-mode run per calibration triple): manage.py calibrate --kg {kg.name} "
                              "--calibration-triples")

    def _restore(self, kg: KnowledgeGraph, model_id: int) -> None:
        try:
            row = restore(kg, model_id)
        except TrainingError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(self.style.SUCCESS(f"Structural model #{row.pk} of {kg.name} v{row.kg_version} is ready again: "
                                             f"{model_summary(row)}; the model it replaces can be restored the same way"))

    @staticmethod
    def _defaults(kg: KnowledgeGraph, folds: int) -> dict:
        return kge.default_config(Triple.objects.filter(kg=kg).count(), Entity.objects.filter(kg=kg).count(),
                                  folds=folds).to_dict()
