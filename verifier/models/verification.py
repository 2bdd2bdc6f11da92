"""The verification data path: task → run → steps → support items → review."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone

from verifier.agent.config import AgentConfig
from verifier.models.kg import Entity, KnowledgeGraph, Relation


class Verdict(models.TextChoices):
    CORRECT = "correct", "Correct"
    INCORRECT = "incorrect", "Incorrect"
    NOT_ENOUGH_EVIDENCE = "not_enough_evidence", "Not enough evidence"

    @classmethod
    def overridden(cls, verdict: str) -> str:
        """What overriding ``verdict`` makes it: Correct ⇄ Incorrect ("" for any other)."""
        return {cls.CORRECT: cls.INCORRECT, cls.INCORRECT: cls.CORRECT}.get(verdict, "")


class VerificationTask(models.Model):
    """A flagged triple waiting for (or having had) an investigation."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        RUNNING = "running", "Running"
        VERIFIED = "verified", "Verified"
        REVIEWED = "reviewed", "Reviewed"

    kg = models.ForeignKey(KnowledgeGraph, on_delete=models.CASCADE, related_name="tasks")
    head = models.ForeignKey(Entity, on_delete=models.PROTECT, related_name="+")
    relation = models.ForeignKey(Relation, on_delete=models.PROTECT, related_name="+")
    tail = models.ForeignKey(Entity, on_delete=models.PROTECT, related_name="+")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING, db_index=True)
    assignee = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="assigned_tasks"
    )
    # Where the flag came from (file name and line, an evaluation, a curator) and any gold label.
    source = models.CharField(max_length=500, blank=True)
    expected_label = models.BooleanField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["kg", "head", "relation", "tail"], name="task_unique_triple"),
        ]

    def __str__(self) -> str:
        return f"task {self.pk}: ({self.head_id}, {self.relation_id}, {self.tail_id})"

    # A task's status follows its runs and reviews; these are the only writes of it.
    #   pending ──run starts──▶ running ──run succeeds──▶ verified (reviewed if a reviewer's decision stands)
    #   running ──run ends without a verdict──▶ pending (unless another run of it is in flight)
    #   any ──a decision is recorded──▶ reviewed ──its last decision is undone──▶ verified

    @classmethod
    def occupy(cls, task_id: int) -> None:
        """A run of the task started: it is running, whatever it was (a verified task can be investigated again)."""
        cls.objects.filter(pk=task_id).update(status=cls.Status.RUNNING)

    @classmethod
    def settle(cls, task_id: int) -> None:
        """A run of the task succeeded: it is verified, or stays reviewed when a reviewer's decision on an earlier
        run stands (that decision remains the task's verdict)."""
        decided = Review.objects.filter(run__task_id=task_id).exclude(verdict="").exists()
        cls.objects.filter(pk=task_id).update(status=cls.Status.REVIEWED if decided else cls.Status.VERIFIED)

    @classmethod
    def release(cls, task_id: int) -> None:
        """A task whose run ended without a verdict is back in the queue, unless another run of it is in flight."""
        if not Run.objects.filter(task_id=task_id).in_flight().exists():
            cls.objects.filter(pk=task_id, status=cls.Status.RUNNING).update(status=cls.Status.PENDING)

    def mark_reviewed(self) -> bool:
        """A reviewer's decision settles the task (call it on a row locked for update). False if it already was."""
        if self.status == self.Status.REVIEWED:
            return False
        self.status = self.Status.REVIEWED
        self.save(update_fields=["status", "updated_at"])
        return True

    def unmark_reviewed(self) -> bool:
        """The task's last decision was undone: a reviewed task is verified again (its runs' verdicts stand), unless a
        decision remains on one of its runs. Call it on a row locked for update. False if nothing changed."""
        decided = Review.objects.filter(run__task=self).exclude(decision=Review.Decision.COMMENT).exists()
        if decided or self.status != self.Status.REVIEWED:
            return False
        self.status = self.Status.VERIFIED
        self.save(update_fields=["status", "updated_at"])
        return True


class RunQuerySet(models.QuerySet):
    """Which runs are in which state, and the transitions that apply to many runs at once. Every transition is one
    conditional UPDATE naming the states it starts from, so two writers racing (a curator cancelling, the worker
    finishing, the sweeper failing) leave the state the first of them wrote."""

    def in_flight(self) -> models.QuerySet:
        """Runs a worker has, or will take: queued or running."""
        return self.filter(status__in=Run.IN_FLIGHT)

    def stalled(self, cutoff: datetime) -> models.QuerySet:
        """Running runs whose worker gave no sign of life since ``cutoff`` (nor started after it, if it never beat)."""
        silent = models.Q(heartbeat_at__lt=cutoff) | models.Q(heartbeat_at__isnull=True, started_at__lt=cutoff)
        return self.filter(silent, status=Run.Status.RUNNING)

    def expecting_message(self, cutoff: datetime, training: Iterable[int]) -> models.QuerySet:
        """Queued since before ``cutoff`` and owed a broker message: not an evaluation's (its harness sends them) and
        not waiting for one of the ``training`` models (the training's end sends it)."""
        return (self.filter(status=Run.Status.QUEUED, created_at__lt=cutoff, evaluation_items__isnull=True)
                .exclude(awaiting_model__in=list(training)))

    def end(self, status: str, **fields) -> int:
        """Those of these runs still running end with ``status`` (succeeded or failed) and ``fields``; how many did.
        A run cancelled or failed meanwhile keeps that state: a finish never overwrites an end."""
        if status not in (Run.Status.SUCCEEDED, Run.Status.FAILED):
            raise ValueError(f"a run ends succeeded or failed, not {status!r}")
        return self.filter(status=Run.Status.RUNNING).update(status=status, finished_at=timezone.now(), **fields)

    def beat(self) -> int:
        """The workers running those of these runs still running are alive now; how many runs that was."""
        return self.filter(status=Run.Status.RUNNING).update(heartbeat_at=timezone.now())

    def cancel(self) -> int:
        """Those of these runs queued or running are cancelled; how many were. A finished run stays as it ended."""
        return self.in_flight().update(status=Run.Status.CANCELLED, finished_at=timezone.now())

    def release_from(self, model_id: int) -> list[int]:
        """The queued runs parked for the training of ``model_id`` stop waiting for it; their ids (lock them first,
        in a transaction, so a run is released once)."""
        released = list(self.select_for_update().filter(status=Run.Status.QUEUED, awaiting_model_id=model_id)
                        .values_list("pk", flat=True))
        Run.objects.filter(pk__in=released).update(awaiting_model=None)
        return released

    def park_for(self, model) -> int:
        """These runs wait for ``model``'s training before they start (a newer job replaced the one they waited for)."""
        return self.update(awaiting_model=model)


class Run(models.Model):
    """One investigation of a task by the agent (or a baseline) with a given configuration."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    IN_FLIGHT = (Status.QUEUED, Status.RUNNING)
    FINISHED = (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED)
    objects = RunQuerySet.as_manager()

    task = models.ForeignKey(VerificationTask, on_delete=models.CASCADE, related_name="runs")
    # Settled once, when the run is created (verifier/wiring.py settle_config): the configuration as asked for, and
    # every setting of the AgentConfig the run runs with (what the request left open filled in).
    request = models.JSONField(default=dict, blank=True, help_text="the configuration as asked for")
    config = models.JSONField(default=dict, blank=True, help_text="the settled configuration the run runs with")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED, db_index=True)
    verdict = models.CharField(max_length=20, choices=Verdict.choices, blank=True)
    explanation = models.TextField(blank=True)
    confidence = models.FloatField(null=True, blank=True, help_text="calibrated probability that the verdict is right")
    # The evidence the confidence was computed from (structural probability, rules, reading, agent verdict).
    assessment = models.JSONField(default=dict, blank=True)
    disputed = models.BooleanField(default=False, help_text="the structural evidence disputes the verdict")
    signals = models.JSONField(default=list, blank=True, help_text="verdict quality signals (verifier/quality.py)")
    structural_model = models.ForeignKey("verifier.StructuralModel", null=True, blank=True, on_delete=models.SET_NULL,
                                         related_name="runs", help_text="the embedding model that scored the triple")
    awaiting_model = models.ForeignKey("verifier.StructuralModel", null=True, blank=True, on_delete=models.SET_NULL,
                                       related_name="awaiting_runs",
                                       help_text="a queued run waits for this training before it starts")
    error = models.TextField(blank=True)
    model = models.CharField(max_length=200, blank=True)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True, help_text="last sign of life of the worker running it")

    class Meta:
        ordering = ["-created_at", "-id"]

    @property
    def agent_config(self) -> AgentConfig:
        """The settled configuration the run runs with, as stored."""
        return AgentConfig.from_dict(self.config)

    @property
    def is_finished(self) -> bool:
        """Ended for good: succeeded, failed or cancelled (nothing more will be stored)."""
        return self.status in self.FINISHED

    @property
    def is_reviewable(self) -> bool:
        """A verdict a reviewer can accept, override or promote: the run succeeded with one."""
        return self.status == self.Status.SUCCEEDED and bool(self.verdict)

    # The transitions of one run. Its state only moves forward:
    #   queued ──start──▶ running ──succeed / fail──▶ succeeded / failed
    #   queued ──park──▶ queued, awaiting a training (release: back to plain queued)
    #   queued / running ──cancel──▶ cancelled;  running ──(no heartbeat)──▶ failed by the sweeper
    # and a finished run is never started, parked or finished again.

    def start(self) -> None:
        """A queued run starts: running from now, its task running. Call it on the row locked for update."""
        if self.status != self.Status.QUEUED:
            raise ValueError(f"run {self.pk} is {self.status}: only a queued run starts")
        self.status, self.started_at, self.awaiting_model = self.Status.RUNNING, timezone.now(), None
        self.heartbeat_at = self.started_at
        self.save(update_fields=["status", "started_at", "awaiting_model", "heartbeat_at"])
        VerificationTask.occupy(self.task_id)

    def park(self, model) -> None:
        """A queued run waits for ``model``'s training (its KG's first structural model) before it starts."""
        if self.status != self.Status.QUEUED:
            raise ValueError(f"run {self.pk} is {self.status}: only a queued run waits for a training")
        self.awaiting_model = model
        self.save(update_fields=["awaiting_model"])

    def abandon(self, error: str) -> bool:
        """A run delivered again after its worker stopped mid-run (running, or queued with steps stored) is failed
        with ``error``, never resumed, and its task freed. False if it had already ended."""
        ended = Run.objects.filter(pk=self.pk).in_flight().update(status=self.Status.FAILED, finished_at=timezone.now(),
                                                                  error=error)
        self.refresh_from_db()
        if ended:
            VerificationTask.release(self.task_id)
        return bool(ended)

    def finish(self, status: str, **fields) -> bool:
        """End this running run with ``status`` (succeeded or failed) and ``fields``, and settle its task: verified
        (or kept reviewed) on success, else back in the queue unless another run of it is in flight. One conditional
        UPDATE: a run cancelled (or failed by the sweeper) meanwhile keeps that state, and False is returned. Call it
        in a transaction."""
        ended = Run.objects.filter(pk=self.pk).end(status, **fields)
        self.refresh_from_db()
        if ended and status == self.Status.SUCCEEDED:
            VerificationTask.settle(self.task_id)
        else:
            VerificationTask.release(self.task_id)
        return bool(ended)

    def cancel(self) -> bool:
        """Stop this run if it is queued or running (its worker stores no further step) and free its task, also when
        its worker is gone and will never do it. False if it had already ended."""
        cancelled = Run.objects.filter(pk=self.pk).cancel()
        if cancelled:
            self.refresh_from_db()
            VerificationTask.release(self.task_id)
        return bool(cancelled)

    def charge(self, prompt_tokens: int, completion_tokens: int, cost_usd) -> bool:
        """Add a step's tokens and cost to the run's. False, and nothing added, when the run was cancelled: its
        worker then stores no further step."""
        totals = {"prompt_tokens": self.prompt_tokens + prompt_tokens,
                  "completion_tokens": self.completion_tokens + completion_tokens, "cost_usd": self.cost_usd + cost_usd}
        if not Run.objects.filter(pk=self.pk).exclude(status=self.Status.CANCELLED).update(**totals):
            return False
        self.prompt_tokens, self.completion_tokens, self.cost_usd = totals.values()
        return True

    def final_verdict(self) -> str:
        """The verdict that stands: the latest reviewer decision's (comments aside), else the agent's."""
        decision = self.reviews.exclude(decision="comment").order_by("-created_at", "-id").first()
        return decision.verdict if decision else self.verdict

    def elapsed(self) -> timedelta | None:
        """From start to finish (to now while it runs); None before it starts."""
        if self.started_at is None:
            return None
        return (self.finished_at or timezone.now()) - self.started_at

    @property
    def elapsed_seconds(self) -> int | None:
        elapsed = self.elapsed()
        return None if elapsed is None else int(elapsed.total_seconds())

    def __str__(self) -> str:
        return f"run {self.pk} of task {self.task_id} ({self.status})"


class Step(models.Model):
    """One event of an investigation, numbered; persisted the moment it happens."""

    class Kind(models.TextChoices):
        PLAN = "plan", "Plan"
        THOUGHT = "thought", "Thought"
        ACTION = "action", "Action"
        OBSERVATION = "observation", "Observation"
        VERDICT = "verdict", "Verdict"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="steps")
    seq = models.PositiveIntegerField()
    kind = models.CharField(max_length=12, choices=Kind.choices)
    content = models.TextField(blank=True)
    tool = models.CharField(max_length=100, blank=True)
    arguments = models.JSONField(default=dict, blank=True)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, default=0)  # of the model calls behind this step
    duration_ms = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="step_unique_seq")]

    def __str__(self) -> str:
        return f"step {self.seq} ({self.kind}) of run {self.run_id}"


class SupportItem(models.Model):
    """Something a verdict cites: a triple, a path or a passage, under a key stable within the run."""

    class Kind(models.TextChoices):
        TRIPLE = "triple", "Triple"
        PATH = "path", "Path"
        PASSAGE = "passage", "Passage"
        DEFINITION = "definition", "Definition"
        WEB = "web", "Web snippet"
        PLAUSIBILITY = "plausibility", "Structural plausibility"
        RULE = "rule", "Rule"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="support_items")
    step = models.ForeignKey(Step, null=True, blank=True, on_delete=models.SET_NULL, related_name="support_items")
    key = models.CharField(max_length=20)
    kind = models.CharField(max_length=12, choices=Kind.choices)
    text = models.TextField()
    payload = models.JSONField(default=dict, blank=True, help_text="ids of the entities/relations involved")
    source = models.CharField(max_length=1000, blank=True)
    content_hash = models.CharField(max_length=64, blank=True)
    cited = models.BooleanField(default=False)

    class Meta:
        ordering = ["run", "id"]  # E1, E2, … E10 as found (by key, E10 would sort before E2)
        constraints = [models.UniqueConstraint(fields=["run", "key"], name="support_unique_key")]

    def __str__(self) -> str:
        return f"[{self.key}] {self.text[:60]}"


class Review(models.Model):
    class Decision(models.TextChoices):
        ACCEPT = "accept", "Accept"
        OVERRIDE = "override", "Override"
        NOT_ENOUGH_EVIDENCE = "not_enough_evidence", "Not enough evidence"
        COMMENT = "comment", "Comment"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="reviews")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="reviews")
    decision = models.CharField(max_length=20, choices=Decision.choices)
    verdict = models.CharField(max_length=20, choices=Verdict.choices, blank=True, help_text="final verdict")
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.decision} of run {self.run_id} by {self.reviewer_id}"


class Agreement(models.TextChoices):
    """How a run's reviewers stand on its verdict: each reviewer's latest decision counts (comments aside)."""

    AGREE = "agree", "Reviewer agrees"  # every decision keeps the agent's verdict
    DISAGREE = "disagree", "Reviewer disagrees"  # every decision gives the same other verdict
    SPLIT = "split", "Reviewers disagree"  # the reviewers' decisions give different verdicts
    UNREVIEWED = "unreviewed", "Not reviewed"


def latest_decisions(reviews: Iterable) -> list:
    """Each reviewer's latest decision, from ``reviews`` newest first (Review rows or anything with
    ``decision``, ``verdict`` and ``reviewer_id``); comments decide nothing."""
    latest: dict = {}
    for review in reviews:
        if review.decision != Review.Decision.COMMENT:
            latest.setdefault(review.reviewer_id, review)
    return list(latest.values())


def agreement(decisions: list, agent_verdict: str) -> Agreement:
    """The rule the queue's ``agreement`` filter also applies in SQL (verifier/queue_filters.py)."""
    verdicts = {decision.verdict for decision in decisions}
    if not verdicts:
        return Agreement.UNREVIEWED
    if len(verdicts) > 1:
        return Agreement.SPLIT
    return Agreement.AGREE if verdicts == {agent_verdict} else Agreement.DISAGREE


class SavedView(models.Model):
    """A curator's named queue filter ("disputed, low confidence, mine"), kept as the queue's query string."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="saved_views")
    name = models.CharField(max_length=80)
    query = models.TextField(help_text="the queue's filter parameters, URL-encoded")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["user", "name"], name="one_saved_view_per_name_and_user")]

    def __str__(self) -> str:
        return f"{self.name} ({self.user_id})"
