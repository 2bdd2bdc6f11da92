"""Writes and reads of claims: submit, decompose (pseudo-subgraph, resolution, one task per part), start the parts'
runs, and the claim's verdict from its parts' standing runs (verifier/claims/verdict.py is the rule)."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from verifier.agent.llm import LLM
from verifier.claims.decompose import Decomposition, decompose
from verifier.claims.grounding import ClaimRefused
from verifier.claims.importing import ReadClaims, checked
from verifier.claims.resolve import Resolution, resolve
from verifier.claims.subgraph import NEGATION, SEPARATOR, SubgraphError, is_unknown
from verifier.claims.verdict import NOT_ENOUGH, REFUSED, REFUTED, SUPPORTED, ClaimDecision, ClaimVerdict, PartOutcome, claim_verdict
from verifier.errors import ApplicationError
from verifier.models import Claim, ClaimPart, ClaimReview, KnowledgeGraph, Run, SupportItem, VerificationTask
from verifier.queue_filters import is_evaluation
from verifier.queueing import VERIFY_CLAIM, enqueue
from verifier.selectors import standing_runs, tasks_in_flight
from verifier.services import record_audit, start_runs
from verifier.wiring import build_llm


class ClaimError(ApplicationError):
    """A claim that cannot be taken (empty, too long, a KG not loaded)."""


def submit_claim(*, kg: KnowledgeGraph, text: str, actor=None, source: str = "", category: str = "",
                 expected_label: bool | None = None) -> Claim:
    try:
        row = checked(0, text, expected_label, category)
    except ValueError as error:
        raise ClaimError(str(error)) from None
    text, category = row.text, row.category
    claim = Claim.objects.create(kg=kg, text=text, source=source[:500], category=category, expected_label=expected_label,
                                 created_by=actor if getattr(actor, "is_authenticated", False) else None)
    record_audit(actor=actor, action="claim.submit", obj=claim, after={"text": text})
    return claim


def submit_claims(*, kg: KnowledgeGraph, read: ReadClaims, actor=None, source: str) -> list[Claim]:
    """The rows of a claims file as claims, each queued (source "name:line"); the caller reports ``read.problems``."""
    with transaction.atomic():
        claims = [submit_claim(kg=kg, text=row.text, actor=actor, source=f"{source}:{row.line}", category=row.category,
                               expected_label=row.label) for row in read.rows]
        for claim in claims:
            queue_claim(claim)
    return claims


def queue_claim(claim: Claim) -> None:
    """A worker decomposes the claim and starts its parts' runs once the transaction commits."""
    enqueue(VERIFY_CLAIM, claim.pk)


def verify_claim_now(claim_id: int, *, llm: LLM | None = None) -> Claim:
    """What the worker does for a queued claim: decompose it with the configured model, then queue a run per part.
    A model that cannot be reached fails the claim with the reason (retry it from its page)."""
    claim = Claim.objects.select_related("kg").get(pk=claim_id)
    if claim.status != Claim.Status.PENDING:
        return claim
    try:
        claim = decompose_claim(claim, llm or build_llm())
    except RuntimeError as error:  # LLMError, or no endpoint configured
        Claim.objects.filter(pk=claim.pk).update(status=Claim.Status.FAILED, error=f"the model could not be asked: {error}")
        claim.refresh_from_db()
        return claim
    if claim.status == Claim.Status.DECOMPOSED:
        start_part_runs(claim, actor=claim.created_by)
    return claim


def retry_claim(*, claim: Claim, actor=None) -> Claim:
    """A failed claim goes back to pending and is queued again."""
    if claim.status != Claim.Status.FAILED:
        raise ClaimError(f"claim {claim.pk} is {claim.status}: only a failed claim is retried")
    with transaction.atomic():
        Claim.objects.filter(pk=claim.pk).update(status=Claim.Status.PENDING, error="")
        record_audit(actor=actor, action="claim.retry", obj=claim, before={"error": claim.error})
        queue_claim(claim)
    claim.refresh_from_db()
    return claim


def decompose_claim(claim: Claim, llm: LLM) -> Claim:
    """Write the claim's pseudo-subgraph, keep the triples the claim states, resolve its unknowns and create one task
    per resolved part. Text that is no claim the KG can check is refused with the reason (the model is not asked
    when the text alone shows it); a model reply that is not a pseudo-subgraph over the KG fails the claim with the
    reason. Either way no part is written."""
    try:
        decomposition = decompose(claim.kg, claim.text, llm)
    except ClaimRefused as refusal:
        return _unsettled(claim, Claim.Status.REFUSED, str(refusal))
    except SubgraphError as error:
        return _unsettled(claim, Claim.Status.FAILED, f"no usable pseudo-subgraph: {error}")
    if not decomposition.triples:
        reasons = "; ".join(f"{item.written} ({item.reason})" for item in decomposition.left_out)
        return _unsettled(claim, Claim.Status.REFUSED, "the KG cannot represent this claim as stated: nothing the model "
                                                       f"wrote is stated by it — {reasons}", decomposition)
    resolution = resolve(claim.kg, decomposition)
    with transaction.atomic():
        claim.parts.all().delete()
        _written(claim, decomposition)
        claim.resolution = {u: r.as_dict() for u, r in resolution.items()}
        claim.subgraph = _parts(claim, decomposition, resolution)
        claim.status, claim.error = Claim.Status.DECOMPOSED, ""
        claim.save()
    return claim


def _written(claim: Claim, decomposition: Decomposition) -> None:
    claim.written, claim.model = decomposition.written, decomposition.model
    claim.prompt_tokens, claim.completion_tokens = decomposition.prompt_tokens, decomposition.completion_tokens
    claim.left_out = [item.as_dict() for item in decomposition.left_out]


def _unsettled(claim: Claim, status: str, reason: str, decomposition: Decomposition | None = None) -> Claim:
    """The claim failed or refused with the reason, and what the model wrote if it was asked."""
    with transaction.atomic():
        claim.parts.all().delete()
        if decomposition is not None:
            _written(claim, decomposition)
        claim.subgraph, claim.resolution = [], {}
        claim.status, claim.error = status, reason
        claim.save()
    return claim


def _end(name: str, decomposition: Decomposition, resolution: dict[str, Resolution]):
    """(KG entity or None, the unknown it stood for or "")."""
    if is_unknown(name):
        return resolution[name].entity, name
    return decomposition.entities[name], ""


def _parts(claim: Claim, decomposition: Decomposition, resolution: dict[str, Resolution]) -> list[dict]:
    rows, seq = [], 0
    for triple in decomposition.triples:
        relation = decomposition.relations[triple.relation]
        (head, head_unknown), (tail, tail_unknown) = _end(triple.head, decomposition, resolution), _end(
            triple.tail, decomposition, resolution)
        row = {"written": triple.text(), "negated": triple.negated, "relation": relation.external_id,
               "relation_label": relation.label, "head": head.external_id if head else triple.head,
               "head_label": head.label if head else triple.head, "tail": tail.external_id if tail else triple.tail,
               "tail_label": tail.label if tail else triple.tail, "head_unknown": head_unknown,
               "tail_unknown": tail_unknown, "part": None}
        if head is not None and tail is not None:
            seq += 1
            task, _ = VerificationTask.objects.get_or_create(
                kg=claim.kg, head_id=head.pk, relation_id=relation.pk, tail_id=tail.pk,
                defaults={"source": claim.source if is_evaluation(claim.source) else f"claim {claim.pk}"})
            ClaimPart.objects.create(claim=claim, seq=seq, head_id=head.pk, relation_id=relation.pk, tail_id=tail.pk,
                                     negated=triple.negated, head_unknown=head_unknown, tail_unknown=tail_unknown, task=task)
            row["part"] = seq
        rows.append(row)
    return rows


def start_part_runs(claim: Claim, *, config: dict | None = None, actor=None, queue: bool = True,
                    rerun: bool = False) -> list[Run]:
    """A run for every part whose task has no run in flight and no standing verdict (a triple already verified
    keeps its verdict), or with ``rerun`` whatever verdict it has."""
    parts = list(claim.parts.select_related("task"))
    task_ids = [p.task_id for p in parts]
    settled, busy = ({} if rerun else standing_runs(task_ids)), tasks_in_flight(task_ids)
    return start_runs(tasks=[p.task for p in dict((p.task_id, p) for p in parts).values()
                             if p.task_id not in settled and p.task_id not in busy], config=config, actor=actor, queue=queue)


def part_text(row: dict) -> str:
    return (f"{NEGATION if row['negated'] else ''}{row['head_label']}{SEPARATOR}{row['relation_label']}"
            f"{SEPARATOR}{row['tail_label']}")


@dataclass
class PartView:
    """One triple of a claim's pseudo-subgraph as the page and the API show it."""

    row: dict  # the subgraph entry (names, ids, unknowns, negation)
    part: ClaimPart | None  # None: an unknown of it was not resolved
    run: Run | None  # the run that stands for its task, else its latest run (queued, running, failed)
    outcome: PartOutcome


def parts_of(claim: Claim) -> list[PartView]:
    """The claim's triples with their tasks' runs: the standing run (a reviewer's decision counts as certain),
    else the latest one, so a part in flight shows as such."""
    parts = {p.seq: p for p in claim.parts.select_related("task")}
    task_ids = [p.task_id for p in parts.values()]
    standing = standing_runs(task_ids)
    latest = {}
    for run in Run.objects.filter(task_id__in=task_ids).order_by("-created_at", "-id"):
        latest.setdefault(run.task_id, run)
    runs = Run.objects.in_bulk(list(standing.values()))
    reviewed = set(Run.objects.filter(pk__in=list(standing.values()), reviews__isnull=False).exclude(
        reviews__verdict="").values_list("pk", flat=True))
    cited: dict[int, list[str]] = {}
    for run_id, key in SupportItem.objects.filter(run_id__in=list(standing.values()), cited=True).order_by(
            "run_id", "id").values_list("run_id", "key"):
        cited.setdefault(run_id, []).append(key)
    views = []
    for row in claim.subgraph if claim.status == Claim.Status.DECOMPOSED else []:
        part = parts.get(row["part"]) if row["part"] else None
        if part is None:
            views.append(PartView(row, None, None, PartOutcome(part_text(row), row["negated"], "", None, resolved=False)))
            continue
        run = runs.get(standing.get(part.task_id))
        if run is None:
            last = latest.get(part.task_id)
            ended = last is not None and last.status in (Run.Status.FAILED, Run.Status.CANCELLED)
            views.append(PartView(row, part, last, PartOutcome(part_text(row), part.negated, "", None, run_id=last.pk if ended
                                                               else None, ended_without_verdict=ended)))
            continue
        final = run.final_verdict()
        confidence = 1.0 if run.pk in reviewed else run.confidence
        views.append(PartView(row, part, run, PartOutcome(part_text(row), part.negated, final, confidence,
                                                          cited=tuple(cited.get(run.pk, ())), run_id=run.pk)))
    return views


def standing_decision(claim: Claim) -> ClaimDecision | None:
    """The latest reviewer's decision on the whole claim (comments decide nothing)."""
    review = next((r for r in claim.reviews.all() if r.decision != ClaimReview.Decision.COMMENT), None)  # newest first
    return ClaimDecision(review.verdict, review.reviewer.get_username(), review.reason) if review else None


def outcome(claim: Claim, parts: list[PartView] | None = None) -> ClaimVerdict:
    """The claim's verdict now: a reviewer's decision on the claim, else its parts' (verifier/claims/verdict.py);
    a refused claim has none."""
    if claim.status == Claim.Status.REFUSED:
        return ClaimVerdict(REFUSED, None, f"Refused: {claim.error}", from_parts=REFUSED)
    return claim_verdict([view.outcome for view in (parts if parts is not None else parts_of(claim))],
                         standing_decision(claim))


def review_claim(*, claim: Claim, reviewer, decision: str, reason: str = "", verdict: str = "") -> ClaimReview:
    """A reviewer's decision on the claim as a whole. accept → the verdict its parts give (they must give one);
    override → the other verdict, or ``verdict`` where the parts give none yet, with a reason; comment → text only.
    The same decision sent again by the same reviewer is recorded once (its latest review is returned)."""
    decisions = ClaimReview.Decision
    if decision not in decisions.values:
        raise ClaimError(f"unknown decision {decision!r}; use one of {', '.join(decisions.values)}")
    reason = reason.strip()
    if claim.status != Claim.Status.DECOMPOSED:
        raise ClaimError(f"claim {claim.pk} is {claim.status}: only a claim written as triples can be reviewed")
    from_parts = claim_verdict([view.outcome for view in parts_of(claim)]).verdict
    if decision == decisions.COMMENT:
        if not reason:
            raise ClaimError("a comment needs text")
        final = ""
    elif decision == decisions.ACCEPT:
        if from_parts not in (SUPPORTED, REFUTED):
            raise ClaimError("the evidence does not settle the parts: override with a verdict" if from_parts == NOT_ENOUGH
                             else "the parts give no verdict yet: accept once they do, or override with a verdict")
        final = from_parts
    else:
        if not reason:
            raise ClaimError("overriding a claim's verdict needs a reason")
        final = verdict or {SUPPORTED: REFUTED, REFUTED: SUPPORTED}.get(from_parts, "")
        if final not in ClaimReview.Verdict.values or final == from_parts:
            raise ClaimError(f"an override must change the verdict {from_parts!r} to supported or refuted")
    with transaction.atomic():
        Claim.objects.select_for_update().filter(pk=claim.pk).first()  # one decision at a time per claim
        latest = ClaimReview.objects.filter(claim=claim, reviewer=reviewer).order_by("-created_at", "-id").first()
        if latest is not None and (latest.decision, latest.verdict, latest.reason) == (decision, final, reason):
            return latest
        review = ClaimReview.objects.create(claim=claim, reviewer=reviewer, decision=decision, verdict=final, reason=reason)
        record_audit(actor=reviewer, action=f"claim.review.{decision}", obj=claim, before={"verdict": from_parts},
                     after={"verdict": final, "reason": reason, "review": review.pk})
    return review
