"""KG_Rules: what the Horn rules mined from the KG say for and against a triple.

The triple is named in the header by labels and ids, never in edge notation: the anti-leakage proof
(verifier/evaluation/outcomes.py) flags any observation writing the triple under test as a KG edge.
"""

from __future__ import annotations

from collections.abc import Sequence

from verifier.kg.base import Ref
from verifier.structure.evidence import Unavailable
from verifier.structure.rule_evidence import Grounding, OtherValue, RuleEvidence, RuleMatch, TypeViolation, rule_features
from verifier.tools import render
from verifier.tools.base import EvidenceItem, ToolContext, ToolResult
from verifier.tools.names import Resolved, resolve_entity, resolve_relation
from verifier.tools.registry import tool


def _named(ref: Ref) -> str:
    return f"{ref.label} ({ref.id})" if ref.label and ref.label != ref.id else ref.id


def _labels(groundings: Sequence[Grounding]) -> dict[str, str]:
    labels = {}
    for grounding in groundings:
        for edge in grounding.path.edges:
            for ref in (edge.head, edge.relation, edge.tail):
                labels[ref.id] = ref.name
    return labels


def _paths(groundings: tuple[Grounding, ...]) -> str:
    return "; ".join(render.path(g.path) for g in groundings)


def _rule_item(match: RuleMatch, relation: Ref, line: str, role: str, source: str) -> EvidenceItem:
    rule = match.rule
    edges = [list(edge.ids) for g in match.groundings for edge in g.path.edges]
    payload = {"rule": rule.id, "role": role, "relation": relation.id, "confidence": round(rule.pca_confidence, 4),
               "support": rule.support, "value": match.value.id, "edges": edges, "labels": _labels(match.groundings)}
    return EvidenceItem("rule", line, payload, source, display=line)


def _rule_line(match: RuleMatch, *, competing: bool = False) -> str:
    rule = match.rule
    measures = f"PCA confidence {rule.pca_confidence:.2f}, support {rule.support}"
    predicts = f" predicts {match.value.distinct_name} instead" if competing else ""
    return f"Rule #{rule.id} ({measures}){predicts}: {rule.text} — here: {_paths(match.groundings)}"


def _other_value_line(other: OtherValue, relation: str) -> str:
    edge = other.fact.path.edges[0]
    if other.side == "tail":
        whose = f"{edge.head.distinct_name} already has another one"
        kind = "one object per subject"
    else:
        whose = f"{edge.tail.distinct_name} already has another subject"
        kind = "one subject per object"
    return (f"[{relation}] is near-functional ({kind} in {other.functionality:.0%} of its facts) and {whose}: "
            f"{render.path(other.fact.path)}")


def _violation_line(violation: TypeViolation, relation: str) -> str:
    names = lambda refs: ", ".join(r.name for r in refs)  # noqa: E731
    origin = " (derived from the KG's facts, not declared)" if violation.derived else ""
    end = "subject" if violation.side == "domain" else "object"
    return (f"Type mismatch: {violation.entity.distinct_name} has types {names(violation.entity_types)}, none of the {end} types of "
            f"[{relation}]: {names(violation.expected)}{origin}")


def _for(evidence: RuleEvidence, source: str) -> tuple[list[str], list[EvidenceItem]]:
    head, relation, tail = evidence.triple.head, evidence.triple.relation, evidence.triple.tail
    if not evidence.supporting:
        return [f"Evidence for: none of the {evidence.rules_of_relation} rule(s) mined for [{relation.name}] holds here."], []
    count = len(evidence.supporting_confidences)
    shown = f", {len(evidence.supporting)} shown" if count > len(evidence.supporting) else ""
    lines = [f"Evidence for ({count} rule(s) whose body holds between {head.distinct_name} and {tail.distinct_name}, best first{shown}):"]
    items = []
    for match in evidence.supporting:
        lines.append(_rule_line(match))
        items.append(_rule_item(match, relation, lines[-1], "for", source))
    return lines, items


def _against(evidence: RuleEvidence, source: str) -> tuple[list[str], list[EvidenceItem]]:
    if not evidence.has_evidence_against:
        return ["Evidence against: none (no other stated value of a functional relation, no type mismatch, "
                "no rule predicting another value)."], []
    relation = evidence.triple.relation
    lines, items = ["Evidence against:"], []
    for other in evidence.other_values:
        lines.append(_other_value_line(other, relation.name))
        items.append(EvidenceItem("rule", lines[-1], {
            "rule": None, "role": "against", "reason": "functional", "functionality": round(other.functionality, 4),
            "edges": [list(e.ids) for e in other.fact.path.edges], "labels": _labels([other.fact])}, source, display=lines[-1]))
    for violation in evidence.violations:
        lines.append(_violation_line(violation, relation.name))
        items.append(EvidenceItem("rule", lines[-1], {
            "rule": None, "role": "against", "reason": violation.side, "entity": violation.entity.id, "edges": [],
            "types": [t.id for t in violation.entity_types], "expected": [t.id for t in violation.expected]},
            source, display=lines[-1]))
    for match in evidence.competing:
        lines.append(_rule_line(match, competing=True))
        items.append(_rule_item(match, relation, lines[-1], "against", source))
    return lines, items


def render_evidence(evidence: RuleEvidence, source: str, kg_name: str) -> tuple[str, list[EvidenceItem]]:
    """The observation text and its items: one line (and item) per rule and per piece of counter-evidence."""
    claim = " · ".join(_named(ref) for ref in (evidence.triple.head, evidence.triple.relation, evidence.triple.tail))
    if not evidence.supporting and not evidence.has_evidence_against:
        mined = f"{evidence.rules_of_relation} rule(s) were mined for [{evidence.triple.relation.name}]"
        return f"No mined rule predicts the claim {claim} ({mined}; none holds here); no evidence against it either.", []
    for_lines, for_items = _for(evidence, source)
    against_lines, against_items = _against(evidence, source)
    header = f"Mined rules on the claim {claim} ({kg_name}; the claim itself is never used as evidence):"
    return "\n".join([header, *for_lines, *against_lines]), for_items + against_items


@tool("KG_Rules", category="structural")
def kg_rules(ctx: ToolContext, head: str, relation: str, tail: str) -> ToolResult:
    """Check a triple against Horn rules mined from the KG (such as "a person's spouse's country is usually
    theirs too"): the rules that predict it, with the KG paths grounding them, and what speaks against it
    (another value of a functional relation, a type outside the relation's domain or range, a rule
    predicting a different value).

    Args:
        head: the subject entity, by label or id
        relation: the relation, by label or id
        tail: the object entity, by label or id
    """
    if ctx.structure is None:
        return ToolResult(f"Rule evidence needs a local KG (rules are mined from the local store); {ctx.kg.name} is not one.",
                          ok=False)
    resolved = []
    for text, resolve in ((head, resolve_entity), (relation, resolve_relation), (tail, resolve_entity)):
        result = resolve(ctx, text)
        if not isinstance(result, Resolved):
            return ToolResult(result.message, ok=False)
        resolved.append(result)
    h, r, t = resolved
    evidence = ctx.structure.rules(h.id, r.id, t.id)
    if isinstance(evidence, Unavailable):
        return ToolResult(evidence.message, ok=False)
    source = f"{ctx.kg.name} ({ctx.kg.version})"
    text, items = render_evidence(evidence, source, ctx.kg.name)
    probability = ctx.structure.rule_probability(evidence)
    if probability is not None:
        line = f"Taken together the rule evidence gives the claim a probability of {probability:.2f} (calibrated)."
        items.insert(0, EvidenceItem("rule", line, {"rule": None, "role": "summary", "probability": round(probability, 4),
                                                    "features": rule_features(evidence), "edges": []}, source, display=line))
        text = f"{line}\n{text}"
    notes = "".join(f"({x.note})\n" for x in resolved if x.note)
    return ToolResult(notes + text, items)
