"""One full verification by the real embedded model (SmolLM2-135M on llama.cpp, grammar-constrained), in the
profile a deployment on the embedded model runs by default (compact)."""

import pytest

from kgv_web.embedded_llm import EmbeddedLLM
from verifier.agent.llm import OpenAICompatibleLLM
from verifier.models import Run, VerificationTask
from verifier.runner import execute_run
from verifier.services import start_run
from verifier.wiring import settle_config

pytestmark = [pytest.mark.django_db, pytest.mark.llm, pytest.mark.slow]


@pytest.fixture(scope="module")
def local_model(tmp_path_factory):
    server = EmbeddedLLM(tmp_path_factory.mktemp("llm"), "smollm2-135m").start()
    yield server
    server.stop()


def test_the_embedded_model_verifies_a_triple_end_to_end(local_model, world_kg):
    kg = world_kg
    task = VerificationTask.objects.create(kg=kg, head=kg.entities.get(external_id="Q42"),
                                           relation=kg.relations.get(external_id="P27"), tail=kg.entities.get(external_id="Q145"))
    llm = OpenAICompatibleLLM(local_model.url, "not-needed", "smollm2-135m", timeout=300, supports_grammar=True)
    run = start_run(task=task, config=settle_config({"t_max": 2, "use_memory": False, "max_step_tokens": 96,
                                                     "verdict_probe": True}, llm), queue=False)
    execute_run(run.pk, llm=llm, await_structure=False)
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.error
    assert run.verdict in ("correct", "incorrect")
    assert run.config["profile"] == "compact"
    kinds = list(run.steps.order_by("seq").values_list("kind", flat=True))
    # The brief, the plan, then the loop's steps unless the plan settled the claim, the probe's thought, the verdict.
    assert kinds[:3] == ["action", "observation", "plan"] and kinds[-2:] == ["thought", "verdict"]
    assert run.prompt_tokens > 0 and run.completion_tokens > 0
    # Under the grammars every reading is one of three words, and every step an action on a listed tool or the answer.
    judgments = {item.payload["judgment"] for item in run.support_items.filter(kind="passage", payload__has_key="relevance")}
    assert judgments and judgments <= {"supports", "contradicts", "silent"}
    # The model read the head's article; llama.cpp returns log-probabilities, though a 135M model's likeliest first
    # words need not include a verdict.
    article = run.support_items.get(kind="passage", payload__has_key="reading_logit")
    assert article.text.startswith("Douglas Noel Adams") and article.payload["reading"]
    actions = list(run.steps.filter(kind="action").values_list("tool", flat=True))
    assert actions[0] == "Evidence_Brief" and set(actions[1:]) <= {
        "KG_Definition", "KG_Neighbor", "KG_Path", "KG_Plausibility", "KG_Rules", "Read_Sentences", "Read_Passage",
        "Wiki_Evidence"}
    # llama.cpp returns log-probabilities, so the probe reads the model's log-odds when its likeliest first words
    # include a verdict (a 135M model's sometimes do not, and the probe says so).
    probe = run.steps.filter(kind="thought").last().content
    assert probe.startswith("(verdict probe: ") and "returned no log-probabilities" not in probe
    assert (run.assessment["agent_logit"] is not None) == probe.startswith("(verdict probe: the model puts P(Correct)")


def test_the_embedded_model_writes_a_claims_pseudo_subgraph_only_in_the_kgs_names(local_model, world_kg):
    # ClaimPKG's constrained generation on llama.cpp: whatever a 135M model makes of the claim, every entity it writes
    # is one the claim names (or an unknown) and every relation one the KG has, so the reply always maps to the KG.
    from verifier.claims.pipeline import decompose_claim, submit_claim
    from verifier.models import Claim

    llm = OpenAICompatibleLLM(local_model.url, "not-needed", "smollm2-135m", timeout=300, supports_grammar=True)
    claim = decompose_claim(submit_claim(kg=world_kg, text="Douglas Adams was born in a city of the United Kingdom."), llm)
    # What it wrote may state more than the claim does (then it is left out, or the claim refused), never other names.
    assert claim.status in (Claim.Status.DECOMPOSED, Claim.Status.REFUSED), claim.error
    labels = set(world_kg.relations.values_list("label", flat=True))
    written = [line.removeprefix("NOT ").split(" || ") for line in claim.written.splitlines() if " || " in line]
    assert written, claim.written
    for head, relation, tail in written:
        assert {head, tail} <= {"Douglas Adams", "United Kingdom"} | {n for n in (head, tail) if n.startswith("unknown_")}
        assert relation in labels
    relations = set(world_kg.relations.values_list("external_id", flat=True))
    for row in claim.subgraph:
        assert {row["head"], row["tail"]} <= {"Q42", "Q145"} | set(claim.resolution) | {
            r["entity"] for r in claim.resolution.values()}
        assert row["relation"] in relations and not row["negated"]
