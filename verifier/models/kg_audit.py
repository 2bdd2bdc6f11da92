"""A KG audit: every triple of one KG version scored by how likely it is wrong, in chunks any worker may take, and
its suspects (the triples most likely wrong) with their reasons — not to be confused with the audit log
(``AuditEvent``: who did what). And the onboarding of a KG of one's own, which ends ready for its first audit."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone

from verifier.models.kg import Entity, KnowledgeGraph, Relation
from verifier.models.verification import VerificationTask

# A running audit whose chunks have all stopped reporting for this long is no longer run by anybody.
KG_AUDIT_STALE_AFTER = timedelta(minutes=5)


class KGAudit(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        FINISHED = "finished", "Finished"
        FAILED = "failed", "Failed"

    kg = models.ForeignKey(KnowledgeGraph, on_delete=models.CASCADE, related_name="kg_audits")
    kg_version = models.PositiveIntegerField()
    structural_model = models.ForeignKey("verifier.StructuralModel", null=True, blank=True, on_delete=models.SET_NULL,
                                         related_name="+", help_text="the model whose networks scored the triples")
    previous = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
                                 help_text="the audit of the same KG it is compared with")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED, db_index=True)
    stage = models.CharField(max_length=200, blank=True)
    triples = models.PositiveIntegerField(default=0)
    scored = models.PositiveIntegerField(default=0)
    chunk_size = models.PositiveIntegerField(default=50_000)
    scorer = models.JSONField(default=dict, blank=True, help_text="the fitted classifier every chunk scores with")
    metrics = models.JSONField(default=dict, blank=True,
                               help_text="how well the classifier tells the KG's facts from corruptions, out of fold")
    summary = models.JSONField(default=dict, blank=True, help_text="distribution, suspects per relation, what moved")
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"KG audit {self.pk} of {self.kg_id} v{self.kg_version} ({self.status})"

    @property
    def progress(self) -> float:
        return self.scored / self.triples if self.triples else 0.0

    @property
    def is_stale(self) -> bool:
        """Running on paper, but no chunk has reported for a while (its workers are gone)."""
        if self.status not in (self.Status.QUEUED, self.Status.RUNNING):
            return False
        last = self.heartbeat_at or self.created_at
        return last is not None and timezone.now() - last > KG_AUDIT_STALE_AFTER * (6 if self.status == self.Status.QUEUED else 1)


class AuditChunk(models.Model):
    """One slice of the KG's triples (by position in the audit's order), scored by whichever worker takes it."""

    audit = models.ForeignKey(KGAudit, on_delete=models.CASCADE, related_name="chunks")
    index = models.PositiveIntegerField()
    done = models.BooleanField(default=False)
    scores = models.BinaryField(null=True, blank=True, editable=False, help_text="row-id triples and P(wrong), as .npz")
    seconds = models.FloatField(default=0.0)

    class Meta:
        ordering = ["audit", "index"]
        constraints = [models.UniqueConstraint(fields=["audit", "index"], name="auditchunk_unique")]


class Suspect(models.Model):
    """A triple among the audit's most likely wrong, with what stands out about it."""

    audit = models.ForeignKey(KGAudit, on_delete=models.CASCADE, related_name="suspects")
    rank = models.PositiveIntegerField()
    head = models.ForeignKey(Entity, on_delete=models.CASCADE, related_name="+", db_constraint=False)
    relation = models.ForeignKey(Relation, on_delete=models.CASCADE, related_name="+", db_constraint=False)
    tail = models.ForeignKey(Entity, on_delete=models.CASCADE, related_name="+", db_constraint=False)
    suspicion = models.FloatField(help_text="how likely it is wrong, 0–1 (odds taken as even; see the audit's page)")
    reasons = models.JSONField(default=list, blank=True)
    details = models.JSONField(default=dict, blank=True, help_text="the rules, the model and the reference KGs, read on demand")
    new = models.BooleanField(default=False, help_text="not a suspect of the audit compared with")
    task = models.ForeignKey(VerificationTask, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
                             help_text="the flagged triple it was queued as")

    class Meta:
        ordering = ["audit", "rank"]
        constraints = [models.UniqueConstraint(fields=["audit", "rank"], name="suspect_rank_unique")]
        indexes = [models.Index(fields=["audit", "relation"], name="suspect_relation_idx")]


class Onboarding(models.Model):
    """A KG of one's own taken from a file to calibrated verdicts: load, structural model, its own weighing."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        FINISHED = "finished", "Finished"
        FAILED = "failed", "Failed"

    name = models.SlugField(max_length=100, help_text="the name the KG gets")
    file = models.CharField(max_length=1000, help_text="where the uploaded file is kept until it is loaded")
    kg = models.ForeignKey(KnowledgeGraph, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    stage = models.CharField(max_length=200, blank=True)
    progress = models.FloatField(default=0.0)
    seconds = models.JSONField(default=dict, blank=True, help_text="seconds each stage took")
    quality = models.JSONField(default=dict, blank=True, help_text="what was reached, measured on the KG's own facts")
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
