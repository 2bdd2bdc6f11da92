"""KG_Rules on the local store, as the model sees it: keyed lines, rule items with ids, nothing leaked."""

from __future__ import annotations

import pytest

from tests.verifier.structure.test_rules import codex, family, load_codex  # noqa: F401  (fixtures)
from verifier.agent.steps import Claim
from verifier.agent.support import SupportSet
from verifier.evaluation.outcomes import item_leaks
from verifier.kg.store import PostgresKG
from verifier.models import Entity, Relation
from verifier.structure.evidence import StructuralEvidence
from verifier.structure.rules import mine_rules
from verifier.tools.base import ToolContext
from verifier.tools.registry import Toolbox

pytestmark = pytest.mark.django_db


def context(kg, head: str, relation: str, tail: str, *, structure: bool = True) -> ToolContext:
    labels = dict(Entity.objects.filter(kg=kg, external_id__in=[head, tail]).values_list("external_id", "label"))
    query = Claim(head, relation, tail, labels[head], Relation.objects.get(kg=kg, external_id=relation).label, labels[tail])
    return ToolContext(kg=PostgresKG(kg), query=query, structure=StructuralEvidence(kg) if structure else None)


def call(ctx: ToolContext):
    return Toolbox(ctx).call("KG_Rules", [ctx.query.head, ctx.query.relation, ctx.query.tail])


def test_a_codex_triple_gets_keyed_rule_lines_with_groundings_and_nothing_leaks(codex):  # noqa: F811
    # Albert Einstein's languages: German is predicted by where he lived, was born and was a citizen.
    ctx = context(codex, "Q937", "P1412", "Q188")
    result = call(ctx)
    assert result.ok, result.text
    observation, keyed = SupportSet().observe(result)
    lines = observation.splitlines()
    assert lines[0] == ("Mined rules on the claim Albert Einstein (Q937) · languages spoken, written, or signed (P1412) · "
                        "German (Q188) (codex-s; the claim itself is never used as evidence):")
    assert lines[1].startswith("Evidence for (") and "best first" in lines[1]
    rule_lines = [line for line in lines if line.startswith("[E")]
    assert rule_lines and all(k.kind == "rule" for k in keyed) and len(rule_lines) == len(keyed)
    first = rule_lines[0]
    assert first.startswith("[E1] Rule #") and "PCA confidence" in first
    assert " ⇒ (?x) -[languages spoken, written, or signed]-> (?y)" in first
    assert "— here: (Albert Einstein) -[" in first and first.endswith("(German)")
    supporting = [k for k in keyed if k.payload["role"] == "for"]
    assert supporting and all(k.payload["relation"] == "P1412" and k.payload["edges"] for k in supporting)
    assert all(edge[0] == "Q937" or edge[2] == "Q937" for k in supporting for edge in k.payload["edges"][:1])
    assert not item_leaks(ctx.query, [k.payload for k in keyed], [observation])


def test_evidence_against_is_listed_with_keys(family):  # noqa: F811
    result = call(context(family, "p0", "born", "m1"))
    observation, keyed = SupportSet().observe(result)
    lines = observation.splitlines()
    against = lines[lines.index("Evidence against:") + 1:]
    assert against[0] == ("[E1] [place of birth] is near-functional (one object per subject in 92% of its facts) and Person P0 "
                          "already has another one: (Person P0) -[place of birth]-> (City 0)")
    assert any(line.startswith("[E") and "predicts City 0 instead: (?x) -[residence]-> (?y) ⇒ (?x) -[place of birth]-> (?y)"
                                         " — here: (Person P0) -[residence]-> (City 0)" in line for line in against)
    assert keyed[0].payload["edges"] == [["p0", "born", "m0"]] and keyed[0].payload["role"] == "against"


def test_a_type_mismatch_is_said_plainly(family):  # noqa: F811
    text = call(context(family, "m2", "born", "m3")).text
    assert ("Type mismatch: City 2 has types city, none of the subject types of [place of birth]: human "
            "(derived from the KG's facts, not declared)") in text


def test_a_triple_no_rule_speaks_to_says_so(family):  # noqa: F811
    result = call(context(family, "a0", "occupation", "writer"))
    assert result.ok and result.items == []
    assert result.text == ("No mined rule predicts the claim Person A0 (a0) · occupation · Writer (writer) (0 rule(s) were mined "
                           "for [occupation]; none holds here); no evidence against it either.")


def test_without_mined_rules_the_tool_says_so(world_kg):
    result = call(context(world_kg, "Q42", "P27", "Q145"))
    assert not result.ok
    assert result.text.startswith(f"No rules have been mined for world v{world_kg.version} yet")


def test_a_remote_kg_has_no_rule_evidence(world_kg):
    mine_rules(world_kg)
    result = call(context(world_kg, "Q42", "P27", "Q145", structure=False))
    assert not result.ok and "Rule evidence needs a local KG" in result.text
