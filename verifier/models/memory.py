"""The memory bank of curated investigations, and the audit log."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from pgvector.django import VectorField

from verifier.models.kg import EMBEDDING_DIMENSIONS, KnowledgeGraph
from verifier.models.verification import Run, Verdict

# What a bootstrapped entry's provenance says until a curator reviews it (services.review_memory replaces it;
# it travels with the provenance through exports).
UNREVIEWED = "not yet reviewed by a curator"


class MemoryEntry(models.Model):
    """A past investigation (triple text + full trajectory) that guides later ones by similarity."""

    class Status(models.TextChoices):
        ACTIVE = "active", "Active"
        RETIRED = "retired", "Retired"

    # The KG the case was investigated on: its name travels with exports; ``kg`` links it where that KG is loaded
    # (an entry whose KG is not loaded here has none, and guides that KG's claims once it is: bank.link_kg).
    kg_name = models.CharField(max_length=100, blank=True, db_index=True,
                               help_text="the name of the KG the case was investigated on (kg: that KG, where it is loaded)")
    kg = models.ForeignKey(KnowledgeGraph, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    triple_text = models.TextField(help_text='"head relation tail", the text that is embedded')
    relation_label = models.CharField(max_length=500, blank=True)
    trajectory = models.TextField(help_text="Thought/Action/Observation sequence and final answer")
    lesson = models.TextField(blank=True, help_text="the verdict and the evidence that decided it, shown to small models")
    verdict = models.CharField(max_length=20, choices=Verdict.choices)
    embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.ACTIVE, db_index=True)
    # Provenance: the run it was promoted from (if any), who promoted it, and from where it came.
    source_run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    promoted_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    provenance = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    # No vector index: a bank holds hundreds to a few thousand entries, which an exact scan ranks in milliseconds,
    # while an approximate (HNSW) scan filtered by relation and status was seen to miss the nearest entry outright
    # once the graph held many rows of rolled-back or replaced versions.
    class Meta:
        verbose_name_plural = "memory entries"
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.triple_text

    @property
    def awaits_review(self) -> bool:
        return UNREVIEWED in self.provenance


class RunMemory(models.Model):
    """Which memory entries guided a run, with the similarity they were retrieved at."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="memories_used")
    entry = models.ForeignKey(MemoryEntry, on_delete=models.CASCADE, related_name="uses")
    similarity = models.FloatField()
    rank = models.PositiveSmallIntegerField()

    class Meta:
        ordering = ["run", "rank"]
        constraints = [models.UniqueConstraint(fields=["run", "entry"], name="runmemory_unique")]


class AuditEvent(models.Model):
    """Who did what to which object, with the values before and after."""

    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    action = models.CharField(max_length=100, db_index=True)
    object_type = models.CharField(max_length=100)
    object_id = models.CharField(max_length=100)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.action} {self.object_type}:{self.object_id}"
