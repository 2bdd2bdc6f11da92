"""Evaluations: a benchmark (KG + labelled triples) verified under one configuration, K times each.

Each labelled triple is a VerificationTask (shared with the queue, tagged by its source); each
(triple, repeat) is an EvaluationItem pointing at the Run that answered it, so every figure of an
evaluation can be traced to the investigations behind it.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from verifier.agent.config import configuration_label
from verifier.models.kg import KnowledgeGraph
from verifier.models.verification import Run, VerificationTask


class Evaluation(models.Model):
    class Status(models.TextChoices):
        CREATED = "created", "Created"
        RUNNING = "running", "Running"
        INTERRUPTED = "interrupted", "Interrupted"
        FINISHED = "finished", "Finished"

    name = models.SlugField(max_length=200, unique=True)
    # Evaluations run together for one results table (the agent, its ablations and the baselines).
    suite = models.CharField(max_length=200, blank=True, db_index=True)
    kg = models.ForeignKey(KnowledgeGraph, on_delete=models.PROTECT, related_name="evaluations")
    benchmark = models.CharField(max_length=500, help_text="codex-s, fb15k-237 or a file of labelled triples")
    sample_size = models.PositiveIntegerField()
    seed = models.IntegerField(default=0)
    mode = models.CharField(max_length=20, default="agent")
    ablations = models.JSONField(default=list, blank=True, help_text="parts switched off: memory, planning, …")
    repeats = models.PositiveSmallIntegerField(default=1)
    concurrency = models.PositiveSmallIntegerField(default=1)
    config = models.JSONField(default=dict, blank=True, help_text="the AgentConfig every run of this evaluation gets")
    dataset = models.JSONField(default=dict, blank=True, help_text="how the triples were drawn (counts, sampling)")
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.CREATED, db_index=True)
    metrics = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Written by the process driving the evaluation; a fresh one means another driver is at work.
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # The Celery task the workbench handed the evaluation to: it drives only while it is this one (Stop before its
    # turn empties it, a second Resume replaces it).
    worker_driver = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.name

    @property
    def waiting_for_worker(self) -> bool:
        """Handed to the workers from the workbench and not driven yet (they drive one evaluation at a time)."""
        return bool(self.worker_driver) and self.status in (self.Status.CREATED, self.Status.INTERRUPTED)

    @property
    def label(self) -> str:
        """The configuration as the results tables name it (e.g. "KGV-Agent − memory")."""
        return configuration_label(self.mode, self.ablations, abstain=bool(self.config.get("abstain")),
                                   samples=self.config.get("samples"), profile=self.config.get("profile"))


class EvaluationItem(models.Model):
    """One labelled triple of an evaluation at one repeat, and the run that answered it."""

    evaluation = models.ForeignKey(Evaluation, on_delete=models.CASCADE, related_name="items")
    task = models.ForeignKey(VerificationTask, on_delete=models.CASCADE, related_name="evaluation_items")
    repeat = models.PositiveSmallIntegerField(default=0)
    expected_label = models.BooleanField()
    position = models.PositiveIntegerField(default=0, help_text="order of the triple in the drawn sample")
    # The latest run; earlier attempts (superseded or failed) stay on the task's run list.
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="evaluation_items")
    attempts = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["evaluation", "position", "repeat"]
        constraints = [
            models.UniqueConstraint(fields=["evaluation", "task", "repeat"], name="evaluation_item_unique"),
        ]

    def __str__(self) -> str:
        return f"item {self.position}/{self.repeat} of {self.evaluation_id}"
