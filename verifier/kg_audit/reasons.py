"""What stands out about a suspect, in words a KG team can act on: statements about the KG read off the features
the audit scored it by (each true of the KG as it is, the triple itself left out), then — for a suspect a curator
opens — what the mined rules, the structural model and the reference KGs say (``details``)."""

from __future__ import annotations

import math

import numpy as np

from verifier.kg_audit.features import FEATURES
from verifier.models import KnowledgeGraph, Suspect
from verifier.structure.evidence import PlausibilityReport, StructuralEvidence, Unavailable
from verifier.structure.rule_evidence import NEAR_FUNCTIONAL

RARE_TYPE = 0.02  # a type this rare among a relation's subjects (values) is called outside its domain (range)
UNLIKELY = 0.9  # a network that ranks this share of all entities above an end finds it unlikely
UNRELATED = 0.1  # names less alike than this are about unrelated things (2% of WordNet's facts' ends, 1% of their peers)


def _at(features: np.ndarray, name: str) -> float:
    return float(features[FEATURES.index(name)])


def _count(log1p: float) -> int:
    return round(math.expm1(log1p))


def reasons(features: np.ndarray, labels: tuple[str, str, str]) -> list[dict]:
    """The reasons of one triple (its FEATURES row), most telling first: [{"code", "text"}]."""
    head, relation, tail = labels
    out: list[dict] = []

    def add(code: str, text: str) -> None:
        out.append({"code": code, "text": text})

    head_share, tail_share = _at(features, "head_type_share"), _at(features, "tail_type_share")
    if 0 <= tail_share < RARE_TYPE:
        add("range", f"{tail}'s type is outside the usual values of “{relation}”: {tail_share:.1%} of them share it")
    if 0 <= head_share < RARE_TYPE:
        add("domain", f"{head}'s type is outside the usual subjects of “{relation}”: {head_share:.1%} of them share it")
    other_tails, functionality = _count(_at(features, "other_tails")), _at(features, "functionality")
    if other_tails and functionality >= NEAR_FUNCTIONAL:
        add("functional", f"{head} already has {other_tails} other value{'s' if other_tails > 1 else ''} of “{relation}”, "
                          f"which takes one value for {functionality:.0%} of its subjects")
    other_heads, inverse = _count(_at(features, "other_heads")), _at(features, "inverse_functionality")
    if other_heads and inverse >= NEAR_FUNCTIONAL:
        add("inverse-functional", f"{tail} is already the value of “{relation}” for {other_heads} other subject"
                                  f"{'s' if other_heads > 1 else ''}, where a value usually has one")
    tail_rank, head_rank = _at(features, "tail_rank"), _at(features, "head_rank")
    if not math.isnan(tail_rank) and tail_rank >= UNLIKELY:
        add("model-tail", f"the structural model (trained without this triple) ranks {tail} below {tail_rank:.0%} of all "
                          f"entities as a value of “{relation}” for {head}")
    if not math.isnan(head_rank) and head_rank >= UNLIKELY:
        add("model-head", f"the structural model ranks {head} below {head_rank:.0%} of all entities as a subject of "
                          f"“{relation}” with the value {tail}")
    unrelated = {  # name features below UNRELATED, each with what it says
        "name_similarity": ("unrelated-names", f"the names and descriptions of {head} and {tail} have almost nothing in "
                                               "common (similarity {:.2f} of 1)"),
        "head_like_co_subjects": ("unlike-subjects", f"{head} reads like none of the other subjects of “{relation}” with "
                                                     f"the value {tail} (similarity {{:.2f}} of 1 with their names)"),
        "tail_like_co_values": ("unlike-values", f"{tail} reads like none of {head}'s other values of “{relation}” "
                                                 "(similarity {:.2f} of 1 with their names)"),
    }
    for name, (code, text) in unrelated.items():
        similarity = _at(features, name)
        if not math.isnan(similarity) and similarity < UNRELATED:
            add(code, text.format(max(similarity, 0)))
    if not other_tails and not _count(_at(features, "head_as_tail")):
        add("new-subject", f"{head} has no other “{relation}” in the KG")
    if not _count(_at(features, "pair_links")):
        add("unlinked", f"nothing else in the KG links {head} and {tail}")
    if _count(_at(features, "head_degree")) == 0 or _count(_at(features, "tail_degree")) == 0:
        lonely = head if _count(_at(features, "head_degree")) == 0 else tail
        add("isolated", f"{lonely} appears in no other triple of the KG")
    return out


def _edge_text(edge) -> str:
    return f"{edge.head.name} · {edge.relation.name} · {edge.tail.name}"


def details(kg: KnowledgeGraph, suspect: Suspect) -> dict:
    """What the rules, the structural model and the reference KGs say about the suspect (read when a curator opens it,
    then kept on the row)."""
    evidence = StructuralEvidence(kg)
    head, relation, tail = suspect.head.external_id, suspect.relation.external_id, suspect.tail.external_id
    out: dict = {"rules": [], "model": None, "reference": []}
    rules = evidence.rules(head, relation, tail, limit=3)
    if not isinstance(rules, Unavailable):
        out["rules"] = ([f"a rule predicts another value: {m.rule.text} gives {m.value.name}" for m in rules.competing]
                        + [f"the KG states another value: {_edge_text(v.fact.path.edges[0])}" for v in rules.other_values]
                        + [f"the {v.side} is outside the relation's declared types" for v in rules.violations]
                        + [f"a rule supports it: {m.rule.text}" for m in rules.supporting])
    report = evidence.plausibility(head, relation, tail)
    if isinstance(report, PlausibilityReport):
        out["model"] = {"probability": report.probability, "tail_rank": report.tail.rank, "candidates": report.tail.candidates,
                        "expected": [c.label for c in report.tail.alternatives]}
        if report.reference:
            out["reference"] = [finding.text(suspect.head.label, suspect.relation.label, suspect.tail.label)
                                for finding in report.reference.findings]
    return out
