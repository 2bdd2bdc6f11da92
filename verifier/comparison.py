"""Two runs of one task side by side: what a re-verification changed.

Read by the compare page (``/runs/<a>/compare/<b>/``) and the API (``GET /api/runs/<a>/compare/<b>/``).
Evidence is matched by its content hash (the same fact retrieved again under another key is the same
evidence), steps by their position in the investigation.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from verifier.errors import ApplicationError
from verifier.models import Run, SupportItem


class NotComparable(ApplicationError):
    """The two runs cannot be compared (different tasks, or the same run)."""


@dataclass(frozen=True)
class RunSide:
    id: int
    status: str
    verdict: str
    confidence: float | None
    final_verdict: str  # the latest reviewer decision's verdict, else the agent's
    disputed: bool
    model: str
    structural_model: int | None
    elapsed_seconds: int | None
    prompt_tokens: int
    completion_tokens: int
    steps: int
    created_at: str


@dataclass(frozen=True)
class EvidenceChange:
    kind: str
    text: str
    source: str
    key_before: str  # the key in the first run ("" when added)
    key_after: str  # the key in the second run ("" when dropped)
    cited_before: bool
    cited_after: bool


@dataclass(frozen=True)
class StepPair:
    seq: int
    before: str  # "action: KG_Neighbor(head=Q42)", "" past the end of that run
    after: str


@dataclass
class RunComparison:
    before: RunSide
    after: RunSide
    verdict_changed: bool
    final_verdict_changed: bool
    confidence_change: float | None
    added: list[EvidenceChange] = field(default_factory=list)
    dropped: list[EvidenceChange] = field(default_factory=list)
    kept: list[EvidenceChange] = field(default_factory=list)
    steps: list[StepPair] = field(default_factory=list)
    first_divergent_step: int | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def _side(run: Run, steps: int) -> RunSide:
    return RunSide(
        id=run.pk, status=run.status, verdict=run.verdict, confidence=run.confidence, final_verdict=run.final_verdict(),
        disputed=run.disputed, model=run.model, structural_model=run.structural_model_id,
        elapsed_seconds=run.elapsed_seconds, prompt_tokens=run.prompt_tokens, completion_tokens=run.completion_tokens,
        steps=steps, created_at=run.created_at.isoformat(),
    )


def _identity(item: SupportItem) -> str:
    return item.content_hash or f"{item.kind}\x1f{item.text}"


def _step_text(step) -> str:
    if step.kind == "action" and step.tool:
        arguments = ", ".join(str(value) if str(name).isdigit() else f"{name}={value}"  # positional ones as given
                              for name, value in sorted((step.arguments or {}).items()))
        return f"action: {step.tool}({arguments})"
    first = (step.content or "").strip().splitlines()[0] if (step.content or "").strip() else ""
    return f"{step.kind}: {first[:160]}"


def compare_runs(before: Run, after: Run) -> RunComparison:
    """``before`` and ``after`` must be two different runs of the same task (usually older and newer)."""
    if before.pk == after.pk:
        raise NotComparable(f"run {before.pk} compared with itself; choose another run of task {before.task_id}")
    if before.task_id != after.task_id:
        raise NotComparable(f"run {before.pk} is of task {before.task_id} and run {after.pk} of task {after.task_id}; "
                            "only runs of one task can be compared")
    items_before = {_identity(i): i for i in before.support_items.order_by("id")}
    items_after = {_identity(i): i for i in after.support_items.order_by("id")}

    def change(identity: str) -> EvidenceChange:
        old, new = items_before.get(identity), items_after.get(identity)
        some = new or old
        return EvidenceChange(kind=some.kind, text=some.text, source=some.source,
                              key_before=old.key if old else "", key_after=new.key if new else "",
                              cited_before=bool(old and old.cited), cited_after=bool(new and new.cited))

    steps_before = [_step_text(s) for s in before.steps.order_by("seq")]
    steps_after = [_step_text(s) for s in after.steps.order_by("seq")]
    length = max(len(steps_before), len(steps_after))
    pairs = [StepPair(seq=i + 1, before=steps_before[i] if i < len(steps_before) else "",
                      after=steps_after[i] if i < len(steps_after) else "") for i in range(length)]
    divergent = next((pair.seq for pair in pairs if pair.before != pair.after), None)
    side_before, side_after = _side(before, len(steps_before)), _side(after, len(steps_after))
    both = before.confidence is not None and after.confidence is not None
    return RunComparison(
        before=side_before, after=side_after,
        verdict_changed=before.verdict != after.verdict,
        final_verdict_changed=side_before.final_verdict != side_after.final_verdict,
        confidence_change=round(after.confidence - before.confidence, 4) if both else None,
        added=[change(i) for i in items_after if i not in items_before],
        dropped=[change(i) for i in items_before if i not in items_after],
        kept=[change(i) for i in items_after if i in items_before],
        steps=pairs, first_divergent_step=divergent,
    )
