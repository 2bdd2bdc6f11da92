"""What an export says about a run, gathered once: every format (JSON, CSV, HTML/PDF, PROV-O) renders these.

A selection is given as task ids, run ids and/or claim ids. A task stands for its latest reviewed run, else its
latest finished run (status succeeded, newest first); tasks with no finished run are reported as skipped, never
silently dropped. A claim in plain language brings its parts' tasks, and a record of its own: its text, the
pseudo-subgraph, each part's triple and standing run, its verdict and the reviewers' decisions on it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime

from django.db.models import Prefetch
from django.utils import timezone

from verifier.claims.pipeline import PartView, outcome, parts_of
from verifier.errors import ApplicationError
from verifier.models import Agreement, Claim, Review, Run, RunMemory, Step, SupportItem, VerificationTask, agreement, latest_decisions
from verifier.selectors import HEAVY_FIELDS, in_kg, standing_runs, stated_by_kg
from verifier.services import MAX_BULK

MAX_SELECTION = MAX_BULK  # the queue exports every task of a view (a bulk action), so an export takes as many


@dataclass(frozen=True)
class Term:
    """An entity or relation of the triple: KG id and label."""

    id: str
    label: str


@dataclass(frozen=True)
class StepRecord:
    seq: int
    kind: str
    content: str
    tool: str
    arguments: dict
    duration_ms: int


@dataclass(frozen=True)
class EvidenceRecord:
    """A support item of the run; ``cited`` when the verdict refers to it by its key."""

    key: str
    kind: str
    text: str
    source: str
    content_hash: str
    cited: bool
    step_seq: int | None


@dataclass(frozen=True)
class ReviewRecord:
    id: int
    reviewer_id: int
    reviewer: str
    decision: str
    verdict: str
    reason: str
    created_at: datetime

    @property
    def outcome(self) -> str:
        """The decision as a reader says it: "accepted", "overridden to incorrect", "not enough evidence"."""
        if self.decision == Review.Decision.OVERRIDE:
            return f"overridden to {self.verdict.replace('_', ' ')}"
        return {Review.Decision.ACCEPT: "accepted", Review.Decision.NOT_ENOUGH_EVIDENCE: "not enough evidence"}.get(
            self.decision, self.decision)


def latest_decision(reviews: list[ReviewRecord]) -> ReviewRecord | None:
    """The latest reviewer decision of ``reviews`` (newest first; comments excluded), which settles the verdict."""
    return next((r for r in reviews if r.decision != Review.Decision.COMMENT), None)


@dataclass(frozen=True)
class MemoryUseRecord:
    entry_id: int
    triple_text: str
    similarity: float
    rank: int


@dataclass(frozen=True)
class RunRecord:
    run_id: int
    task_id: int
    kg: str
    head: Term
    relation: Term
    tail: Term
    expected_label: bool | None
    in_kg: bool | None  # the KG states the triple now (None: a remote KG, not looked up)
    status: str
    verdict: str
    explanation: str
    confidence: float | None  # calibrated probability that the verdict is right
    disputed: bool  # the structural evidence disputes the verdict
    signals: list[str]  # verdict quality signals (verifier/quality.py)
    p_true: float | None  # combined calibrated probability that the triple is true
    structural_probability: float | None  # the KG-embedding model's calibrated P(true)
    assessment: dict  # everything the confidence was computed from ({} on older runs)
    structural_model_id: int | None  # the embedding model that scored the triple
    structural_model: str  # its description ("ComplEx model #4 of codex-s v2"), or ""
    model: str
    config: dict
    prompt_tokens: int
    completion_tokens: int
    cost_usd: str
    created_by: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    steps: list[StepRecord] = field(default_factory=list)
    evidence: list[EvidenceRecord] = field(default_factory=list)
    reviews: list[ReviewRecord] = field(default_factory=list)
    memories: list[MemoryUseRecord] = field(default_factory=list)

    @property
    def triple_text(self) -> str:
        return f"{self.head.label} {self.relation.label} {self.tail.label}"

    @property
    def decision(self) -> ReviewRecord | None:
        """The latest reviewer decision (comments excluded), which settles the final verdict."""
        return latest_decision(self.reviews)

    @property
    def final_verdict(self) -> str:
        decision = self.decision
        return decision.verdict if decision else self.verdict

    @property
    def agreement(self) -> Agreement:
        """How the reviewers stand on the verdict (``verifier.models.agreement``, as the queue says it)."""
        return agreement(latest_decisions(self.reviews), self.verdict)

    @property
    def rule_probability(self) -> float | None:
        return _probability(self.assessment, "rule_probability")

    @property
    def disputed_reason(self) -> str:
        return str(self.assessment.get("disputed_reason") or "")

    @property
    def cited_evidence(self) -> list[EvidenceRecord]:
        return [item for item in self.evidence if item.cited]

    def to_dict(self) -> dict:
        data = asdict(self)
        data.update(triple_text=self.triple_text, final_verdict=self.final_verdict, agreement=str(self.agreement))
        return data


@dataclass(frozen=True)
class ClaimPartRecord:
    seq: int | None  # None: an unknown of the triple no KG entity resolves, so it has no task
    text: str  # as the claim reads it ("NOT …" for a denied triple)
    head: Term
    relation: Term
    tail: Term
    negated: bool
    head_unknown: str  # the unknown_i the head stood for, or ""
    tail_unknown: str
    task_id: int | None
    run_id: int | None  # the run that stands for the task (None: not verified yet)
    triple_verdict: str
    triple_confidence: float | None
    state: str  # supported / refuted / open: whether the part holds as the claim says


@dataclass(frozen=True)
class ClaimRecord:
    claim_id: int
    kg: str
    text: str
    status: str
    error: str
    category: str
    expected_label: bool | None
    source: str
    model: str  # the model that wrote the pseudo-subgraph
    written: str  # the pseudo-subgraph as the model wrote it
    verdict: str  # supported / refuted / open: a reviewer's decision on the claim, else from its parts
    verdict_from_parts: str
    decided_by: str
    confidence: float | None
    justification: str
    created_at: datetime
    parts: list[ClaimPartRecord] = field(default_factory=list)
    reviews: list[ReviewRecord] = field(default_factory=list)  # decisions on the whole claim (supported / refuted)

    @property
    def decision(self) -> ReviewRecord | None:
        """The latest reviewer decision on the claim as a whole."""
        return latest_decision(self.reviews)

    @property
    def task_ids(self) -> list[int]:
        return list(dict.fromkeys(part.task_id for part in self.parts if part.task_id is not None))

    def to_dict(self) -> dict:
        return asdict(self)


def _part(view: PartView) -> ClaimPartRecord:
    row = view.row
    return ClaimPartRecord(
        seq=row["part"], text=view.outcome.text,
        head=Term(row["head"], row["head_label"]), relation=Term(row["relation"], row["relation_label"]),
        tail=Term(row["tail"], row["tail_label"]), negated=row["negated"],
        head_unknown=row["head_unknown"], tail_unknown=row["tail_unknown"],
        task_id=view.part.task_id if view.part else None, run_id=view.outcome.run_id,
        triple_verdict=view.outcome.verdict, triple_confidence=view.outcome.confidence, state=view.outcome.state)


def claim_record(claim: Claim) -> ClaimRecord:
    parts = parts_of(claim)
    verdict = outcome(claim, parts)
    return ClaimRecord(
        claim_id=claim.pk, kg=claim.kg.name, text=claim.text, status=claim.status, error=claim.error,
        category=claim.category, expected_label=claim.expected_label, source=claim.source, model=claim.model,
        written=claim.written, verdict=verdict.verdict, verdict_from_parts=verdict.from_parts,
        decided_by=verdict.decided_by, confidence=verdict.confidence, justification=verdict.justification,
        created_at=claim.created_at, parts=[_part(view) for view in parts],
        reviews=[ReviewRecord(r.pk, r.reviewer_id, _user_name(r.reviewer), r.decision, r.verdict, r.reason, r.created_at)
                 for r in claim.reviews.all()])


@dataclass
class Selection:
    records: list[RunRecord]
    skipped_tasks: list[int]
    taken_at: datetime = field(default_factory=timezone.now)  # every format of one selection names this moment
    claims: list[ClaimRecord] = field(default_factory=list)

    def claims_of(self, task_id: int) -> list[int]:
        """The selected claims a task is a part of."""
        return [claim.claim_id for claim in self.claims if task_id in claim.task_ids]


class SelectionError(ApplicationError):
    """The ids asked for do not name anything exportable."""


def _term(obj) -> Term:
    return Term(obj.external_id, obj.label or obj.external_id)


def _user_name(user) -> str:
    return user.get_username() if user is not None else ""


def _probability(assessment: dict, key: str) -> float | None:
    value = assessment.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _record(run: Run) -> RunRecord:
    task = run.task
    assessment = run.assessment if isinstance(run.assessment, dict) else {}
    steps = list(run.steps.all())
    seq_of = {step.pk: step.seq for step in steps}
    return RunRecord(
        run_id=run.pk, task_id=task.pk, kg=task.kg.name,
        head=_term(task.head), relation=_term(task.relation), tail=_term(task.tail),
        expected_label=task.expected_label, in_kg=in_kg(task.kg, run.stated),
        status=run.status, verdict=run.verdict, explanation=run.explanation,
        confidence=run.confidence, disputed=run.disputed, signals=list(run.signals or []), p_true=_probability(assessment, "p_true"),
        structural_probability=_probability(assessment, "structural_probability"), assessment=assessment,
        structural_model_id=run.structural_model_id,
        structural_model=run.structural_model.description if run.structural_model else "",
        model=run.model, config=run.config, prompt_tokens=run.prompt_tokens,
        completion_tokens=run.completion_tokens, cost_usd=str(run.cost_usd), created_by=_user_name(run.created_by),
        created_at=run.created_at, started_at=run.started_at, finished_at=run.finished_at,
        steps=[StepRecord(s.seq, s.kind, s.content, s.tool, s.arguments, s.duration_ms) for s in steps],
        evidence=[EvidenceRecord(i.key, i.kind, i.text, i.source, i.content_hash, i.cited, seq_of.get(i.step_id))
                  for i in run.support_items.all()],
        reviews=[ReviewRecord(r.pk, r.reviewer_id, _user_name(r.reviewer), r.decision, r.verdict, r.reason, r.created_at)
                 for r in run.reviews.all()],
        memories=[MemoryUseRecord(m.entry_id, m.entry.triple_text, m.similarity, m.rank) for m in run.memories_used.all()],
    )


def select(*, task_ids: Iterable[int] = (), run_ids: Iterable[int] = (), claim_ids: Iterable[int] = ()) -> Selection:
    """The records of the runs named directly, of the latest finished run of each task and of each claim's parts'
    tasks, in the order asked; and the claims' own records."""
    task_ids, run_ids, claim_ids = list(dict.fromkeys(task_ids)), list(dict.fromkeys(run_ids)), list(dict.fromkeys(claim_ids))
    if not task_ids and not run_ids and not claim_ids:
        raise SelectionError("name the tasks, runs or claims to export")
    if len(task_ids) + len(run_ids) + len(claim_ids) > MAX_SELECTION:
        raise SelectionError(f"at most {MAX_SELECTION} tasks, runs and claims per export")
    missing_tasks = set(task_ids) - set(VerificationTask.objects.filter(pk__in=task_ids).values_list("pk", flat=True))
    missing_runs = set(run_ids) - set(Run.objects.filter(pk__in=run_ids).values_list("pk", flat=True))
    claims = Claim.objects.select_related("kg").prefetch_related("reviews__reviewer").in_bulk(claim_ids)
    if missing_tasks or missing_runs or len(claims) < len(claim_ids):
        named = [f"task {pk}" for pk in sorted(missing_tasks)] + [f"run {pk}" for pk in sorted(missing_runs)] + [
            f"claim {pk}" for pk in claim_ids if pk not in claims]
        raise SelectionError(f"not found: {', '.join(named)}")
    claim_list = [claim_record(claims[pk]) for pk in claim_ids]
    task_ids = list(dict.fromkeys([*task_ids, *(t for claim in claim_list for t in claim.task_ids)]))
    latest = standing_runs(task_ids)
    wanted = list(dict.fromkeys([*run_ids, *(latest[t] for t in task_ids if t in latest)]))
    runs = (
        Run.objects.filter(pk__in=wanted)
        .annotate(stated=stated_by_kg("task__"))
        .select_related("task__kg", "task__head", "task__relation", "task__tail", "created_by", "structural_model__kg")
        .defer(*(f"structural_model__{name}" for name in HEAVY_FIELDS))
        .prefetch_related(
            Prefetch("steps", queryset=Step.objects.order_by("seq")),
            Prefetch("support_items", queryset=SupportItem.objects.order_by("id")),  # E1, E2, … E10 as found
            Prefetch("reviews", queryset=Review.objects.select_related("reviewer").order_by("-created_at", "-id")),
            Prefetch("memories_used", queryset=RunMemory.objects.select_related("entry").order_by("rank")),
        )
    )
    by_id = {run.pk: run for run in runs}
    return Selection(records=[_record(by_id[pk]) for pk in wanted], skipped_tasks=[t for t in task_ids if t not in latest],
                     claims=claim_list)
