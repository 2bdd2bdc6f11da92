"""Reviewers' figures: how many decisions each made, how often they kept the agent's verdict, and how often they
agree with another reviewer who decided on the same run (each reviewer's latest decision per run)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path
from django.views.decorators.http import require_GET

from verifier.models import Review
from verifier.roles import VIEWER, role_required


@dataclass
class ReviewerFigures:
    username: str
    decisions: int = 0
    accepted: int = 0
    overridden: int = 0
    not_enough_evidence: int = 0
    shared: int = 0  # runs another reviewer also decided on
    agreed: int = 0  # of those, runs where they reached the same final verdict

    @property
    def kept_share(self) -> float | None:
        return self.accepted / self.decisions if self.decisions else None

    @property
    def agreement(self) -> float | None:
        return self.agreed / self.shared if self.shared else None


def reviewer_figures() -> list[ReviewerFigures]:
    latest: dict[tuple[int, int], Review] = {}  # (run, reviewer) → the reviewer's latest decision on the run
    for review in (Review.objects.exclude(decision=Review.Decision.COMMENT).select_related("reviewer")
                   .order_by("created_at", "id")):
        latest[(review.run_id, review.reviewer_id)] = review
    figures: dict[int, ReviewerFigures] = {}
    by_run: dict[int, list[Review]] = defaultdict(list)
    for review in latest.values():
        row = figures.setdefault(review.reviewer_id, ReviewerFigures(review.reviewer.username))
        row.decisions += 1
        row.accepted += review.decision == Review.Decision.ACCEPT
        row.overridden += review.decision == Review.Decision.OVERRIDE
        row.not_enough_evidence += review.decision == Review.Decision.NOT_ENOUGH_EVIDENCE
        by_run[review.run_id].append(review)
    for decisions in by_run.values():
        for review in decisions:
            others = [other for other in decisions if other.reviewer_id != review.reviewer_id]
            if others:
                figures[review.reviewer_id].shared += 1
                figures[review.reviewer_id].agreed += all(other.verdict == review.verdict for other in others)
    return sorted(figures.values(), key=lambda row: (-row.decisions, row.username))


@require_GET
@role_required(VIEWER)
def reviewers(request: HttpRequest) -> HttpResponse:
    return render(request, "verifier/reviewers.html", {"rows": reviewer_figures()})


urlpatterns = [path("reviewers/", reviewers, name="reviewers")]
