"""Structural evidence of a KG: its embedding model (one network per fold of its triples), the rules mined from
it, and the labelled triples used to fit anything (never evaluated)."""

from __future__ import annotations

from datetime import timedelta

from django.db import models
from django.utils import timezone

from verifier.models.kg import Entity, KnowledgeGraph, Relation

# A training job that has not reported for this long is no longer run by anybody (its worker died).
TRAINING_STALE_AFTER = timedelta(minutes=5)


class StructuralModelQuerySet(models.QuerySet):
    def in_flight(self) -> StructuralModelQuerySet:
        return self.filter(status__in=[StructuralModel.Status.QUEUED, StructuralModel.Status.TRAINING])

    def ready_for(self, kg: KnowledgeGraph) -> StructuralModel | None:
        """The model that scores the KG's triples now: its newest ready one, of the current version or, while a
        changed KG's model trains, of an earlier one (without its calibration: megabytes, read once per process
        and calibration by verifier/structure/scoring.py; every tool call asks this). Nothing is read out of
        the calibration: even one key of it costs the database a pass over the whole document."""
        return (self.filter(kg=kg, status=StructuralModel.Status.READY)
                .select_related("kg").defer("calibration").order_by("-kg_version", "-id").first())


class StructuralModel(models.Model):
    """A knowledge-graph embedding model (PyKEEN) of one version of a KG: ``folds`` networks, network k trained on
    every triple outside fold k (verifier/structure/folds.py), with a calibration of their scores into
    probabilities."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        TRAINING = "training", "Training"
        READY = "ready", "Ready"
        FAILED = "failed", "Failed"
        SUPERSEDED = "superseded", "Superseded"

    kg = models.ForeignKey(KnowledgeGraph, on_delete=models.CASCADE, related_name="structural_models")
    kg_version = models.PositiveIntegerField()
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.QUEUED, db_index=True)
    stage = models.CharField(max_length=100, blank=True, help_text="what the training job is doing now")
    progress = models.FloatField(default=0.0, help_text="0–1, of the whole job")
    config = models.JSONField(default=dict, blank=True, help_text="the model and its hyperparameters")
    folds = models.PositiveSmallIntegerField(default=5, help_text="networks, each trained without one fold of the triples")
    metrics = models.JSONField(default=dict, blank=True, help_text="validation MRR, training time, calibration error")
    # Digest of the training triples: a reload that changes nothing reuses the trained model.
    training_digest = models.CharField(max_length=64, blank=True)
    training_triples = models.PositiveIntegerField(default=0)
    calibration = models.JSONField(default=dict, blank=True, help_text="fitted score → probability maps")
    calibrated_at = models.DateTimeField(null=True, blank=True, help_text="when the calibration was fitted")
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)

    objects = StructuralModelQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"structural model {self.pk} of {self.kg_id} v{self.kg_version} ({self.status})"

    @property
    def is_stale(self) -> bool:
        """In flight on paper, but nobody has reported progress for a while (its worker is gone)."""
        if self.status not in (self.Status.QUEUED, self.Status.TRAINING):
            return False
        last = self.heartbeat_at or self.created_at
        limit = TRAINING_STALE_AFTER * (6 if self.status == self.Status.QUEUED else 1)  # a queued job waits for a worker
        return last is not None and timezone.now() - last > limit

    @property
    def calibration_stamp(self) -> str:
        """When the calibration was fitted: what names it in the per-process caches of a calibration."""
        return self.calibrated_at.isoformat() if self.calibrated_at else ""

    @property
    def description(self) -> str:
        kge = (self.config or {}).get("kge") or {}
        return f"{kge.get('model', 'KGE')} model #{self.pk} of {self.kg.name} v{self.kg_version}"


class FoldNetwork(models.Model):
    """One network of a structural model: trained on every KG triple outside its fold, it scores the triples of
    its fold (which it never saw) and any triple whose fold it is."""

    model = models.ForeignKey(StructuralModel, on_delete=models.CASCADE, related_name="networks")
    fold = models.PositiveSmallIntegerField()
    weights = models.BinaryField(editable=False)
    metrics = models.JSONField(default=dict, blank=True, help_text="epochs, minutes, validation MRR, why it stopped")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["model", "fold"]
        constraints = [models.UniqueConstraint(fields=["model", "fold"], name="foldnetwork_unique")]


class FitTriple(models.Model):
    """A labelled triple used to fit something (a calibration, a threshold, the confidence model). The
    evaluation harness never draws it, unless the fit is cross-fitted: a triple with a ``fold`` is scored by
    the variant of the fit that left its fold out (verifier/structure/fitting.py)."""

    class Purpose(models.TextChoices):
        STRUCTURAL_CALIBRATION = "structural", "Calibration of the structural model"
        CONFIDENCE = "confidence", "Fit of the verdict confidence"
        MEMORY = "memory", "Memory bank (bootstrapped or promoted)"

    kg = models.ForeignKey(KnowledgeGraph, on_delete=models.CASCADE, related_name="fit_triples")
    purpose = models.CharField(max_length=12, choices=Purpose.choices)
    head = models.ForeignKey(Entity, on_delete=models.CASCADE, related_name="+", db_constraint=False)
    relation = models.ForeignKey(Relation, on_delete=models.CASCADE, related_name="+", db_constraint=False)
    tail = models.ForeignKey(Entity, on_delete=models.CASCADE, related_name="+", db_constraint=False)
    label = models.BooleanField()
    fold = models.PositiveSmallIntegerField(null=True, blank=True,
                                            help_text="the fold a cross-fitted fit left out to score this triple")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["kg", "purpose", "head", "relation", "tail"], name="fittriple_unique")]


class MinedRule(models.Model):
    """A Horn rule ``body ⇒ relation(x, y)`` of length ≤ 2 mined from one KG version (AMIE's measures).

    ``body`` is a list of atoms ``[relation id, forward]`` walked from x to y: one atom reads
    ``r1(x, y)`` (forward) or ``r1(y, x)``; two read ``r1(x, z) ∧ r2(z, y)`` with each atom reversible."""

    kg = models.ForeignKey(KnowledgeGraph, on_delete=models.CASCADE, related_name="rules")
    kg_version = models.PositiveIntegerField()
    relation = models.ForeignKey(Relation, on_delete=models.CASCADE, related_name="+", db_constraint=False)
    body = models.JSONField()
    support = models.PositiveIntegerField()
    head_coverage = models.FloatField()
    std_confidence = models.FloatField()
    pca_confidence = models.FloatField()

    class Meta:
        ordering = ["-pca_confidence", "-support"]
        indexes = [models.Index(fields=["kg", "kg_version", "relation"], name="rule_kg_relation_idx")]


class ConfidenceModel(models.Model):
    """How a verdict's confidence is computed from its evidence: a logistic model over the agent's
    verdict, the structural probability, rule and reading evidence, fitted on labelled runs."""

    kg = models.ForeignKey(KnowledgeGraph, null=True, blank=True, on_delete=models.CASCADE, related_name="+",
                           help_text="the KG it was fitted on; empty: any KG")
    features = models.JSONField(help_text="feature names, in the order of the coefficients")
    coefficients = models.JSONField()
    intercept = models.FloatField()
    metrics = models.JSONField(default=dict, blank=True, help_text="sample size, cross-validated ECE and accuracy")
    folds = models.JSONField(default=list, blank=True,
                             help_text="cross-fitting: per fold, the weights fitted without it ({coefficients, intercept})")
    fitted = models.JSONField(default=dict, blank=True,
                              help_text="the triples it was fitted on: 'kg<TAB>head<TAB>relation<TAB>tail' (external ids) → "
                                        "[fold, label]; a fitted triple is weighed by its fold's weights")
    source = models.CharField(max_length=500, blank=True, help_text="the labelled runs it was fitted on")
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"confidence model {self.pk} ({self.source})"
