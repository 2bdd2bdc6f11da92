"""Claims in plain language: a sentence, the pseudo-subgraph a model wrote for it, and its parts — each part a
triple verified as any flagged triple is (its own task, runs, evidence and review)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from verifier.models.kg import Entity, KnowledgeGraph, Relation
from verifier.models.verification import VerificationTask


class Claim(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", "Pending"  # not decomposed yet
        DECOMPOSED = "decomposed", "Decomposed"  # its parts exist; their runs decide the verdict
        FAILED = "failed", "Failed"  # no usable pseudo-subgraph; ``error`` says why
        # Not a claim the KG can check: no claim at all, no entity of the KG named, or nothing the model wrote is
        # stated by it. ``error`` says why; no part exists and the claim has no verdict.
        REFUSED = "refused", "Refused"

    class Category(models.TextChoices):
        ONE_HOP = "one-hop", "One-hop"
        CONJUNCTION = "conjunction", "Conjunction"
        EXISTENCE = "existence", "Existence"
        MULTI_HOP = "multi-hop", "Multi-hop"
        NEGATION = "negation", "Negation"

    kg = models.ForeignKey(KnowledgeGraph, on_delete=models.CASCADE, related_name="claims")
    text = models.TextField()
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.PENDING, db_index=True)
    # The model's pseudo-subgraph as written ("head || relation || tail" lines) and as read: a list of
    # {"head", "relation", "tail", "negated"} with KG ids or ``unknown_i``.
    written = models.TextField(blank=True)
    subgraph = models.JSONField(default=list, blank=True)
    # unknown_i → {"entity": id, "label", "score", "candidates": [[id, label, score], …]} or {"entity": None}.
    resolution = models.JSONField(default=dict, blank=True)
    # What the model wrote that the claim does not state, left out before any run: [{"written", "reason"}, …].
    left_out = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)
    source = models.CharField(max_length=500, blank=True)  # a file and line, a benchmark, a curator
    category = models.CharField(max_length=12, choices=Category.choices, blank=True)
    expected_label = models.BooleanField(null=True, blank=True)
    model = models.CharField(max_length=200, blank=True)  # the model that wrote the pseudo-subgraph
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"claim {self.pk}: {self.text[:60]}"


class ClaimPart(models.Model):
    """One resolved triple of a claim. ``negated``: the claim says it does not hold. A side that was an
    ``unknown_i`` in the pseudo-subgraph names it in ``head_unknown`` / ``tail_unknown``."""

    claim = models.ForeignKey(Claim, on_delete=models.CASCADE, related_name="parts")
    seq = models.PositiveIntegerField()
    head = models.ForeignKey(Entity, on_delete=models.PROTECT, related_name="+")
    relation = models.ForeignKey(Relation, on_delete=models.PROTECT, related_name="+")
    tail = models.ForeignKey(Entity, on_delete=models.PROTECT, related_name="+")
    negated = models.BooleanField(default=False)
    head_unknown = models.CharField(max_length=20, blank=True)
    tail_unknown = models.CharField(max_length=20, blank=True)
    task = models.ForeignKey(VerificationTask, on_delete=models.PROTECT, related_name="claim_parts")

    class Meta:
        ordering = ["claim", "seq"]
        constraints = [models.UniqueConstraint(fields=["claim", "seq"], name="claim_part_unique_seq")]

    def __str__(self) -> str:
        return f"part {self.seq} of claim {self.claim_id}"


class ClaimReview(models.Model):
    """A reviewer's decision on a claim as a whole: it settles the claim's verdict whatever its parts say (a
    claim can be wrong in a way no part shows: a part the model left out, a relation read too loosely). A
    decision on one part's run is an ordinary ``Review`` and turns the claim through its part."""

    class Decision(models.TextChoices):
        ACCEPT = "accept", "Accept"
        OVERRIDE = "override", "Override"
        COMMENT = "comment", "Comment"

    class Verdict(models.TextChoices):
        SUPPORTED = "supported", "Supported"
        REFUTED = "refuted", "Refuted"

    claim = models.ForeignKey(Claim, on_delete=models.CASCADE, related_name="reviews")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="claim_reviews")
    decision = models.CharField(max_length=10, choices=Decision.choices)
    verdict = models.CharField(max_length=10, choices=Verdict.choices, blank=True, help_text="the claim's final verdict")
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.decision} of claim {self.claim_id} by {self.reviewer_id}"
