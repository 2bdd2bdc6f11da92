"""Writes and reads of claims: submit, decompose (pseudo-subgraph, resolution, one task per part), start the parts'
runs, and the claim's verdict from its parts' standing runs (verifier/claims/verdict.py is the rule)."""

from __future__ import annotations

from django.db import transaction

from verifier.agent.llm import LLM
from verifier.claims.decompose import Decomposition, decompose
from verifier.claims.resolve import Resolution, resolve
from verifier.claims.subgraph import NEGATION, SEPARATOR, SubgraphError, is_unknown
from verifier.claims.verdict import ClaimVerdict, PartOutcome, claim_verdict
from verifier.errors import ApplicationError
from verifier.models import Claim, ClaimPart, KnowledgeGraph, Run, VerificationTask
from verifier.selectors import standing_runs, tasks_in_flight
from verifier.services import record_audit, start_run

MAX_CLAIM_CHARS = 1000


class ClaimError(ApplicationError):
    """A claim that cannot be taken (empty, too long, a KG not loaded)."""


def submit_claim(*, kg: KnowledgeGraph, text: str, actor=None, source: str = "", category: str = "",
                 expected_label: bool | None = None) -> Claim:
    text = " ".join(text.split())
    if not text:
        raise ClaimError("the claim is empty")
    if len(text) > MAX_CLAIM_CHARS:
        raise ClaimError(f"a claim is at most {MAX_CLAIM_CHARS} characters (this one has {len(text)}); split it")
    if category and category not in Claim.Category.values:
        raise ClaimError(f"unknown category {category!r}: one of {', '.join(Claim.Category.values)}")
    claim = Claim.objects.create(kg=kg, text=text, source=source[:500], category=category, expected_label=expected_label,
                                 created_by=actor if getattr(actor, "is_authenticated", False) else None)
    record_audit(actor=actor, action="claim.submit", obj=claim, after={"text": text})
    return claim


def decompose_claim(claim: Claim, llm: LLM) -> Claim:
    """Write the claim's pseudo-subgraph, resolve its unknowns and create one task per resolved part. A model
    reply that is not a pseudo-subgraph over the KG fails the claim with the reason (nothing else is written)."""
    try:
        decomposition = decompose(claim.kg, claim.text, llm)
    except SubgraphError as error:
        Claim.objects.filter(pk=claim.pk).update(status=Claim.Status.FAILED, error=f"no usable pseudo-subgraph: {error}")
        claim.refresh_from_db()
        return claim
    resolution = resolve(claim.kg, decomposition)
    with transaction.atomic():
        claim.parts.all().delete()
        claim.written, claim.model = decomposition.written, decomposition.model
        claim.prompt_tokens, claim.completion_tokens = decomposition.prompt_tokens, decomposition.completion_tokens
        claim.resolution = {u: r.as_dict() for u, r in resolution.items()}
        claim.subgraph = _parts(claim, decomposition, resolution)
        claim.status, claim.error = Claim.Status.DECOMPOSED, ""
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
                defaults={"source": f"claim {claim.pk}"})
            ClaimPart.objects.create(claim=claim, seq=seq, head_id=head.pk, relation_id=relation.pk, tail_id=tail.pk,
                                     negated=triple.negated, head_unknown=head_unknown, tail_unknown=tail_unknown, task=task)
            row["part"] = seq
        rows.append(row)
    return rows


def start_part_runs(claim: Claim, *, config: dict | None = None, actor=None, queue: bool = True) -> list[Run]:
    """A run for every part whose task has no standing verdict and no run in flight (a triple already verified
    keeps its verdict: re-verify it from its own page)."""
    parts = list(claim.parts.select_related("task"))
    task_ids = [p.task_id for p in parts]
    settled, busy = standing_runs(task_ids), tasks_in_flight(task_ids)
    return [start_run(task=p.task, config=config, actor=actor, queue=queue)
            for p in dict((p.task_id, p) for p in parts).values() if p.task_id not in settled and p.task_id not in busy]


def part_text(row: dict) -> str:
    return (f"{NEGATION if row['negated'] else ''}{row['head_label']}{SEPARATOR}{row['relation_label']}"
            f"{SEPARATOR}{row['tail_label']}")


def outcome(claim: Claim) -> ClaimVerdict:
    """The claim's verdict now: its parts' standing runs (a reviewer's decision counts as certain)."""
    if claim.status != Claim.Status.DECOMPOSED:
        return claim_verdict([])
    parts = {p.seq: p for p in claim.parts.all()}
    standing = standing_runs([p.task_id for p in parts.values()])
    runs = Run.objects.in_bulk(list(standing.values()))
    outcomes = []
    for row in claim.subgraph:
        part = parts.get(row["part"]) if row["part"] else None
        if part is None:
            outcomes.append(PartOutcome(part_text(row), row["negated"], "", None, resolved=False))
            continue
        run = runs.get(standing.get(part.task_id))
        if run is None:
            outcomes.append(PartOutcome(part_text(row), part.negated, "", None))
            continue
        final = run.final_verdict()
        confidence = 1.0 if final != run.verdict or run.reviews.exclude(verdict="").exists() else run.confidence
        cited = tuple(run.support_items.filter(cited=True).order_by("key").values_list("key", flat=True))
        outcomes.append(PartOutcome(part_text(row), part.negated, final, confidence, cited=cited, run_id=run.pk))
    return claim_verdict(outcomes)
