"""The verification queue's filters, search and sort: one function shared by the queue page and the API.

``filter_tasks(queryset, params, user=...)`` reads plain query parameters (a ``QueryDict`` or a dict):

=============== ======================================================================================
``status``      task status, one or several (``status=pending&status=verified`` or ``pending,verified``)
``kg``          knowledge-graph id
``relation``    relation: id, the KG's id (``P27``) or label (``country of citizenship``)
``verdict``     verdict of the task's latest run with a verdict: correct, incorrect, not_enough_evidence,
                or ``none`` (no run has produced a verdict yet)
``agreement``   how the reviewers stand on the verdict of the task's latest reviewed run, each reviewer's
                latest decision counting (``verifier.models.agreement``): ``agree``, ``disagree`` (they all
                give another verdict), ``split`` (reviewers disagree) or ``unreviewed``
``confidence_min`` / ``confidence_max``   bounds (0–1) on the latest verdict's confidence
``disputed``    ``true``: only tasks whose latest verdict the structural evidence disputes; ``false``: the
                others (including tasks with no verdict yet)
``signal``      verdict quality signals of the latest verdict (verifier/quality.py), one or several (all must
                hold), or ``any`` (at least one) / ``none`` (no signal)
``origin``      ``work`` (default: the flagged triples curators imported), ``evaluation`` (the triples an
                evaluation drew from a benchmark) or ``all``
``source``      case-insensitive search in the task's source: the imported file (``flagged.csv``) or the
                evaluation (``evaluation:codex-kge-400``)
``claim``       a claim id: only the triples that are parts of that claim in plain language; ``any``: the
                parts of any claim
``kg_audit``    a KG audit id: only the triples its suspects were queued as (including a triple queued before,
                which kept its task)
``assignee``    a user id, ``me`` (the requesting user) or ``none`` (unassigned)
``q``           case-insensitive search in the head, relation and tail labels and ids
``sort``        one of SORT_KEYS, ``-`` prefix for descending (default ``-created``)
=============== ======================================================================================

Every returned task carries the annotations ``latest_run_id``, ``latest_run_status`` and
``latest_run_awaiting`` (the training that run waits for; its newest run of any status), ``verdict``,
``confidence``, ``disputed``, ``disputed_reason`` and ``signals`` (its newest run with a verdict) and
``agreement`` (an ``Agreement`` value). A value that cannot be understood raises QueueFilterError naming
the parameter.
"""

from __future__ import annotations

from collections.abc import Mapping

from django.db.models import CharField, F, JSONField, OuterRef, Q, QuerySet, Subquery
from django.db.models.expressions import RawSQL
from django.db.models.fields.json import KeyTextTransform

from verifier.models import Agreement, ClaimPart, Run, Suspect, Verdict, VerificationTask
from verifier.params import ParameterError, get_choices, get_fraction, get_id, is_id, parse_id, single
from verifier.quality import CODES

SORT_KEYS = {
    "created": "created_at",
    "updated": "updated_at",
    "status": "status",
    "head": "head__label",
    "relation": "relation__label",
    "tail": "tail__label",
    "verdict": "verdict",
    "confidence": "confidence",
    "id": "id",
}
AGREEMENT_VALUES = tuple(Agreement.values)
DISPUTED_VALUES = ("true", "false")
VERDICT_VALUES = (*Verdict.values, "none")
FILTER_PARAMS = ("status", "kg", "relation", "verdict", "agreement", "confidence_min", "confidence_max", "disputed",
                 "signal", "origin", "source", "claim", "kg_audit", "assignee", "q", "sort")
ORIGIN_VALUES = ("work", "evaluation", "all")
EVALUATION_SOURCE_PREFIX = "evaluation:"  # verifier/evaluation/driver.py names the tasks it creates so
SIGNAL_VALUES = (*CODES, "any", "none")


QueueFilterError = ParameterError  # a filter parameter whose value cannot be used (verifier/params.py)


def annotate_latest(queryset: QuerySet) -> QuerySet:
    """Add the latest run, verdict, confidence, dispute and reviewer agreement of each task (see module doc)."""
    runs = Run.objects.filter(task=OuterRef("pk")).order_by("-created_at", "-id")
    with_verdict = runs.exclude(verdict="")
    return queryset.annotate(
        latest_run_id=Subquery(runs.values("id")[:1]),
        latest_run_status=Subquery(runs.values("status")[:1]),
        latest_run_awaiting=Subquery(runs.values("awaiting_model")[:1]),
        verdict=Subquery(with_verdict.values("verdict")[:1]),
        confidence=Subquery(with_verdict.values("confidence")[:1]),
        disputed=Subquery(with_verdict.values("disputed")[:1]),
        signals=Subquery(with_verdict.values("signals")[:1], output_field=JSONField()),
        disputed_reason=Subquery(with_verdict.annotate(reason=KeyTextTransform("disputed_reason", "assessment")).values("reason")[:1]),
        agreement=RawSQL(_AGREEMENT_SQL, [], output_field=CharField()),
    )


# ``verifier.models.agreement`` in SQL, for the task's latest reviewed run (the run its newest decision is on):
# each reviewer's latest decision, comments aside; a test pins the two to the same answers.
_AGREEMENT_SQL = """
    SELECT CASE WHEN count(*) = 0 THEN 'unreviewed' WHEN count(DISTINCT d.verdict) > 1 THEN 'split'
                WHEN bool_and(d.verdict = d.agent_verdict) THEN 'agree' ELSE 'disagree' END
    FROM (SELECT DISTINCT ON (r.reviewer_id) r.verdict, run.verdict AS agent_verdict
          FROM verifier_review r JOIN verifier_run run ON run.id = r.run_id
          WHERE r.decision <> 'comment' AND r.run_id = (
              SELECT r2.run_id FROM verifier_review r2 JOIN verifier_run run2 ON run2.id = r2.run_id
              WHERE run2.task_id = verifier_verificationtask.id AND r2.decision <> 'comment'
              ORDER BY r2.created_at DESC, r2.id DESC LIMIT 1)
          ORDER BY r.reviewer_id, r.created_at DESC, r.id DESC) d"""


def _filter_assignee(queryset: QuerySet, value: str, user) -> QuerySet:
    if value == "none":
        return queryset.filter(assignee__isnull=True)
    if value == "me":
        if user is None or not user.is_authenticated:
            raise QueueFilterError("assignee", "'me' needs a signed-in user")
        return queryset.filter(assignee=user)
    return queryset.filter(assignee_id=parse_id(value, "assignee", "a user id, 'me' or 'none'"))


def _filter_verdict(queryset: QuerySet, verdicts: list[str]) -> QuerySet:
    condition = Q(verdict__in=[v for v in verdicts if v != "none"])
    if "none" in verdicts:
        condition |= Q(verdict__isnull=True)
    return queryset.filter(condition)


def _filter_agreement(queryset: QuerySet, wanted: list[str]) -> QuerySet:
    return queryset.filter(agreement__in=wanted)


def _filter_disputed(queryset: QuerySet, value: str) -> QuerySet:
    """``true``: the latest verdict is disputed; ``false``: it is not, or there is no verdict yet."""
    if value.lower() not in DISPUTED_VALUES:
        raise QueueFilterError("disputed", f"unknown value {value!r}; use true (only disputed) or false (exclude disputed)")
    if value.lower() == "true":
        return queryset.filter(disputed=True)
    return queryset.filter(Q(disputed=False) | Q(disputed__isnull=True))


def _filter_signals(queryset: QuerySet, wanted: list[str]) -> QuerySet:
    """Every named signal holds on the latest verdict; ``any``: at least one does; ``none``: none does."""
    if "none" in wanted:
        return queryset.filter(Q(signals__isnull=True) | Q(signals=[]))
    if "any" in wanted:
        return queryset.exclude(Q(signals__isnull=True) | Q(signals=[]))
    return queryset.filter(signals__contains=wanted)


def _filter_relation(queryset: QuerySet, value: str) -> QuerySet:
    """A relation by id, by the KG's own id (``P27``) or by its label (``country of citizenship``, any case)."""
    if is_id(value):
        return queryset.filter(relation_id=int(value))
    return queryset.filter(Q(relation__external_id=value) | Q(relation__label__iexact=value))


def is_evaluation(source: str) -> bool:
    """Whether a task's (or a claim's) source names an evaluation, which keeps it out of the work queue."""
    return source.startswith(EVALUATION_SOURCE_PREFIX)


def by_origin(queryset: QuerySet, origin: str = "work") -> QuerySet:
    """Tasks curators imported (``work``), those an evaluation created (``evaluation``), or ``all``."""
    if origin == "work":
        return queryset.exclude(source__startswith=EVALUATION_SOURCE_PREFIX)
    if origin == "evaluation":
        return queryset.filter(source__startswith=EVALUATION_SOURCE_PREFIX)
    return queryset


def _filter_claim(queryset: QuerySet, claim: str) -> QuerySet:
    parts = ClaimPart.objects.all()
    if claim != "any":
        parts = parts.filter(claim_id=parse_id(claim, "claim", "a claim id or 'any'"))
    return queryset.filter(pk__in=parts.values("task_id"))


def _filter_kg_audit(queryset: QuerySet, audit_id: int) -> QuerySet:
    return queryset.filter(pk__in=Suspect.objects.filter(audit_id=audit_id, task__isnull=False).values("task_id"))


def _search(queryset: QuerySet, text: str) -> QuerySet:
    condition = Q()
    for part in ("head", "relation", "tail"):
        condition |= Q(**{f"{part}__label__icontains": text}) | Q(**{f"{part}__external_id__iexact": text})
    return queryset.filter(condition)


def sort_order(value: str) -> list:
    """The ORDER BY of a sort key (``-`` for descending); nulls (no verdict yet) always last."""
    key = value or "-created"
    descending = key.startswith("-")
    field = SORT_KEYS.get(key.lstrip("-"))
    if field is None:
        raise QueueFilterError("sort", f"unknown sort key {key!r}; use {', '.join(SORT_KEYS)} (prefix - for descending)")
    primary = F(field).desc(nulls_last=True) if descending else F(field).asc(nulls_last=True)
    return [primary, "-id" if descending else "id"]


def filter_tasks(queryset: QuerySet, params: Mapping, user=None) -> QuerySet:
    """``queryset`` of VerificationTask annotated (annotate_latest), filtered and sorted by ``params``."""
    queryset = annotate_latest(queryset).select_related("kg", "head", "relation", "tail", "assignee")
    if statuses := get_choices(params, "status", VerificationTask.Status.values):
        queryset = queryset.filter(status__in=statuses)
    if (kg := get_id(params, "kg", hint="a knowledge-graph id")) is not None:
        queryset = queryset.filter(kg_id=kg)
    if relation := single(params, "relation"):
        queryset = _filter_relation(queryset, relation)
    if verdicts := get_choices(params, "verdict", VERDICT_VALUES):
        queryset = _filter_verdict(queryset, verdicts)
    if agreement := get_choices(params, "agreement", AGREEMENT_VALUES):
        queryset = _filter_agreement(queryset, agreement)
    if (low := get_fraction(params, "confidence_min")) is not None:
        queryset = queryset.filter(confidence__gte=low)
    if (high := get_fraction(params, "confidence_max")) is not None:
        queryset = queryset.filter(confidence__lte=high)
    if disputed := single(params, "disputed"):
        queryset = _filter_disputed(queryset, disputed)
    queryset = by_origin(queryset, (get_choices(params, "origin", ORIGIN_VALUES) or ["work"])[-1])
    if source := str(params.get("source") or "").strip():
        queryset = queryset.filter(source__icontains=source)
    if signals := get_choices(params, "signal", SIGNAL_VALUES):
        queryset = _filter_signals(queryset, signals)
    if claim := single(params, "claim"):
        queryset = _filter_claim(queryset, claim)
    if (kg_audit := get_id(params, "kg_audit", hint="a KG audit id")) is not None:
        queryset = _filter_kg_audit(queryset, kg_audit)
    if assignee := single(params, "assignee"):
        queryset = _filter_assignee(queryset, assignee, user)
    if text := str(params.get("q") or "").strip():  # free text: commas are part of the label
        queryset = _search(queryset, text)
    return queryset.order_by(*sort_order(single(params, "sort")))
