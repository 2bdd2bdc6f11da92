"""The claim benchmark written from real CoDEx-S data, and claim evaluation through the evaluate command."""

import json
from collections import Counter

import pytest
from django.core.management import CommandError, call_command

from tests.openai_server import ScriptedOpenAIServer
from verifier.claims.benchmark import CATEGORIES, generate, write_jsonl
from verifier.claims.evaluation import ClaimBenchmarkError, read_claims, summary
from verifier.evaluation.metrics import wilson_interval
from verifier.kg.loader import load_source
from verifier.kg.sources import read_codex
from verifier.models import Claim, ClaimPart, Entity, Relation, Triple

pytestmark = pytest.mark.django_db


@pytest.fixture
def held_out_codex(codex_subset, tmp_path):
    """The CoDEx-S subset with 60 of its triples taken out of the KG: the split claims are written from (half of
    them end where another triple starts, so that multi-hop claims can be written)."""
    kg = load_source(read_codex(codex_subset, name="codex-claims"), embed=False).kg
    train = (codex_subset / "triples" / "train.txt").read_text(encoding="utf-8").splitlines()
    heads = {line.split("\t")[0] for line in train}
    chained = [line for line in train if line.split("\t")[2] in heads][:30]
    lines = chained + [line for line in train if line not in chained][:60 - len(chained)]
    split = {tuple(line.split("\t")) for line in lines}
    rows = Triple.objects.filter(kg=kg).values_list("pk", "head__external_id", "relation__external_id", "tail__external_id")
    Triple.objects.filter(pk__in=[pk for pk, *triple in rows if tuple(triple) in split]).delete()  # one query, not 60
    path = tmp_path / "positives.tsv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return kg, path, split


def test_generated_claims_are_balanced_and_say_what_their_label_says(held_out_codex, tmp_path):
    kg, path, split = held_out_codex
    claims = generate(kg, path, n=20, seed=3)
    counts = Counter((c.category, c.label) for c in claims)
    assert {c for c, _ in counts} == set(CATEGORIES)
    assert all(counts[(c, True)] == counts[(c, False)] for c in CATEGORIES)
    in_kg = {(h, r, t) for h, r, t in Triple.objects.filter(kg=kg).values_list(
        "head__external_id", "relation__external_id", "tail__external_id")}
    known = in_kg | split
    for claim in claims:
        parts = [tuple(p[:3]) for p in claim.parts]
        if claim.category in ("one-hop", "negation"):
            (triple,) = parts
            holds = triple in known
            assert holds == (claim.label != (claim.category == "negation")), claim
            assert triple not in in_kg  # written from the split or a corruption: the KG does not state it
        elif claim.category == "conjunction":
            first, second = parts
            assert second in in_kg and (first in split) == claim.label
        elif claim.category == "multi-hop":
            (h, r, _), (_, r2, t) = parts
            middles = {m for (a, b, m) in known if (a, b) == (h, r)}
            assert any((m, r2, t) in known for m in middles) == claim.label, claim
        else:  # existence
            ((h, r, _),) = parts
            assert any((a, b) == (h, r) for (a, b, _) in in_kg) == claim.label, claim
        assert all(Entity.objects.filter(kg=kg, external_id=e).exists() for e in claim.entities)
        assert claim.claim.endswith(".") and "unknown" not in claim.claim
    relation_labels = set(Relation.objects.filter(kg=kg).values_list("label", flat=True))
    assert any(label in claims[0].claim for label in relation_labels)
    write_jsonl(claims, tmp_path / "claims.jsonl")
    assert [c.text for c in read_claims(tmp_path / "claims.jsonl")] == [c.claim for c in claims]


@pytest.mark.parametrize("line, message", [
    ('{"claim": "A is B."}', "line 1: no 'label'"),
    ('{"claim": "A is B.", "label": "maybe"}', "label 'maybe' is not true or false"),
    ('{"claim": "A is B.", "label": true, "category": "rumour"}', "unknown category 'rumour'"),
    ("not json", "line 1: not JSON"),
    ('{"label": true}', "line 1: the claim is empty"),
])
def test_a_claims_file_that_cannot_be_read_names_its_line(tmp_path, line, message):
    path = tmp_path / "claims.jsonl"
    path.write_text(line + "\n", encoding="utf-8")
    with pytest.raises(ClaimBenchmarkError, match=message):
        read_claims(path)


def _answers(body: dict) -> str:
    """A scripted model: the pseudo-subgraph of the two world claims, and the agent's plan and verdict."""
    prompt = body["messages"][-1]["content"]
    if "Claim: Douglas Adams was born in Cambridge." in prompt:
        return "Douglas Adams || place of birth || Cambridge"
    if "Claim: Douglas Adams was born in Paris." in prompt:
        return "Douglas Adams || place of birth || Paris"
    if "Initial Impression" in prompt:
        return "=== Initial Impression ===\n[Correct] Because.\n=== Strategic Plan ===\n[Step 1] KG_Neighbor(Douglas Adams)"
    verdict = "Incorrect" if "Paris" in " ".join(m["content"] for m in body["messages"]) else "Correct"
    return f"Thought: done.\nFinal Answer: [{verdict}] Because the KG says so."


def test_claims_of_a_mode_that_decides_only_by_weighing_wait_for_a_confidence_model(world_kg, tmp_path):
    """Refused before the model writes any claim as triples, which is the slow part: every part's run would end
    without a verdict."""
    path = tmp_path / "claims.jsonl"
    path.write_text(json.dumps({"claim": "Douglas Adams was born in Cambridge.", "label": True}) + "\n", encoding="utf-8")
    for command in (["evaluate", "--benchmark", str(path)], ["verify_claim", "Douglas Adams was born in Cambridge."]):
        with pytest.raises(CommandError, match=r"^the reading mode decides only through a confidence model, and none is "
                                               r"in force for world: .*calibrate --kg world --calibration-triples"):
            call_command(*command, "--kg", "world", "--mode", "reading")
    assert not Claim.objects.exists()


def test_evaluate_runs_a_claims_file_resumably_with_figures_per_category(world_kg, tmp_path, monkeypatch, capsys):
    path = tmp_path / "claims.jsonl"
    rows = [{"claim": "Douglas Adams was born in Cambridge.", "label": True, "category": "one-hop", "entities": ["Q42", "Q350"]},
            {"claim": "Douglas Adams was born in Paris.", "label": False, "category": "one-hop", "entities": ["Q42", "Q90"]},
            {"claim": "Douglas Adams is not a citizen of France.", "label": True, "category": "negation"}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    with ScriptedOpenAIServer(_answers) as server:
        monkeypatch.setattr("django.conf.settings.LLM_BASE_URL", server.url)
        monkeypatch.setattr("django.conf.settings.LLM_MODEL", "scripted")
        call_command("evaluate", "--benchmark", str(path), "--kg", "world", "--mode", "agent", "--out", str(tmp_path / "out"))
        first, asked = capsys.readouterr().out, len(server.requests)
        call_command("evaluate", "--benchmark", str(path), "--kg", "world", "--mode", "agent", "--no-progress")
        asked_again = len(server.requests) - asked
    assert "[1/3] line 1 one-hop: supported (expected supported) ✓" in first
    assert "[2/3] line 2 one-hop: refuted (expected refuted) ✓" in first
    assert "[3/3] line 3 negation: failed (expected supported) ✗" in first  # the reply is no pseudo-subgraph
    assert "| overall | 3 | 66.7 |" in first
    stored = Claim.objects.filter(kg=world_kg).order_by("source")
    assert [c.source for c in stored] == ["evaluation:claims.jsonl:1", "evaluation:claims.jsonl:2", "evaluation:claims.jsonl:3"]
    parts = ClaimPart.objects.filter(claim__in=stored).select_related("task")
    assert parts and all(p.task.source.startswith("evaluation:") for p in parts)  # kept out of the work queue
    # The second pass reused both decomposed claims and their runs: only the failed claim was asked again (its
    # reply and the repair round).
    assert Claim.objects.filter(kg=world_kg).count() == 3 and asked_again == 2
    results = json.loads((tmp_path / "out" / "claims-agent.json").read_text())
    assert results["categories"]["one-hop"]["accuracy"] == 100.0 and results["entity_recall"] == 100.0


def test_summary_counts_open_and_failed_claims_as_wrong():
    from verifier.claims.evaluation import ClaimResult

    results = [ClaimResult(1, "one-hop", True, "supported", 0.9, True, 1.0),
               ClaimResult(2, "one-hop", False, "open", None, True, 1.0),
               ClaimResult(3, "negation", False, "failed", None, False, 1.0)]
    figures = summary(results)
    assert figures["overall"]["accuracy"] == pytest.approx(33.3) and figures["overall"]["failed"] == 1
    assert figures["entity_recall"] == pytest.approx(66.7)
    low, high = wilson_interval(50, 100)
    assert low == pytest.approx(0.404, abs=0.001) and high == pytest.approx(0.596, abs=0.001)
