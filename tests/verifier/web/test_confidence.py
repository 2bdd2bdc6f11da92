"""What the workbench says about a verdict's confidence and the structural model behind it: the run page's
confidence, dispute and account of how the number was reached; the structural model strip of the queue and
run pages and the JSON it polls; plausibility and rule evidence in the evidence table."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from tests.verifier.web.run_pages import make_finished_run, make_live_run, make_world
from tests.verifier.web.structure_rows import failed, local_kg, ready, training
from tests.verifier.web.workbench import client_for, fast_password_hashing  # noqa: F401  (autouse fixture)
from verifier.models import AuditEvent, StructuralModel, SupportItem

pytestmark = pytest.mark.django_db

ASSESSMENT = {
    "p_true": 0.22, "agent_verdict": "correct", "structural_probability": 0.08, "rule_probability": None,
    "reading": {"supports": 2, "contradicts": 1, "silent": 0}, "confidence_model": 7,
    "disputed_reason": "The structural model gives the triple 0.08 while the agent says Correct.",
    "structural_model": 1, "keys": {"structural": ["E1"], "supports": ["E3", "E4"]},
}


@pytest.fixture
def world():
    world = make_world()
    world.kg.version = 1
    world.kg.save(update_fields=["version"])
    return world


@pytest.fixture
def viewer(make_user):
    return client_for(make_user, "viewer")


def _disputed_run(world):
    run = make_finished_run(world)
    run.confidence, run.disputed, run.assessment, run.structural_model = 0.78, True, ASSESSMENT, ready(world.kg)
    run.save()
    return run


def _page(client, run) -> str:
    response = client.get(reverse("run-detail", args=[run.pk]))
    assert response.status_code == 200
    return response.content.decode()


def _section(page: str, element_id: str) -> str:
    return re.search(rf'<(\w+)[^>]*? id="{element_id}".*?</\1>', page, re.S).group(0)


# ---- the run page -------------------------------------------------------------------------------------

def test_the_run_page_shows_the_confidence_next_to_the_verdict_as_a_meter_and_a_sentence(viewer, world):
    page = _page(viewer, _disputed_run(world))
    beside = _section(page, "verdict-confidence")
    assert '<meter id="confidence-meter" min="0" max="1"' in beside and 'value="0.7800"' in beside
    assert re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", beside)).count("confidence 0.78 that the verdict is right") == 1
    assert page.index('id="verdict"') < page.index('id="verdict-confidence"') < page.index('id="run-status"')


def test_a_disputed_run_has_a_badge_and_its_reason(viewer, world):
    page = _page(viewer, _disputed_run(world))
    assert 'id="disputed-badge"' in _section(page, "verdict-confidence")
    assert 'title="The structural model gives the triple 0.08 while the agent says Correct."' in page
    reason = _section(page, "disputed-reason")
    assert "Disputed" in reason and "The structural model gives the triple 0.08 while the agent says Correct." in reason


def test_the_page_explains_how_the_confidence_was_reached_and_which_model_scored_the_triple(viewer, world):
    run = _disputed_run(world)
    page = _page(viewer, run)
    factors = dict(re.findall(r'<div data-factor="(\w+)"><dt>.*?</dt><dd>(.*?)</dd></div>', page))
    assert {key: re.sub(r"\s*<a .*", "", value) for key, value in factors.items()} == {
        "agent_verdict": "Correct — weighed with the evidence below", "structural_probability": "0.08",
        "rule_probability": "no mined rule applies",
        "reading": "2 supporting, 1 contradicting, 0 silent", "p_true": "0.22", "confidence_model": "confidence model #7",
    }
    # each figure links to the evidence it was read from: a cited row, or the list of everything retrieved
    assert re.findall(r'href="#([\w-]+)">\[(E\d)\]', factors["structural_probability"]) == [("evidence-E1", "E1")]
    assert re.findall(r'href="#([\w-]+)">\[(E\d)\]', factors["reading"]) == [("evidence-E3", "E3"), ("retrieved-E4", "E4")]
    assert 'id="how-confidence" open' in page  # a disputed verdict opens its account
    assert f"Plausibility from the structural model #{run.structural_model_id} of runs-kg (version 1)." in page
    assert f'title="ComplEx model #{run.structural_model_id} of runs-kg v1"' in page  # the builders' words, in its title


def test_signals_the_confidence_model_gives_no_weight_say_so(viewer, world):
    run = _disputed_run(world)
    run.assessment = {**ASSESSMENT, "unweighed": ["supports", "contradicts", "agent_verdict"]}
    run.save(update_fields=["assessment"])
    factors = dict(re.findall(r'<div data-factor="(\w+)"><dt>.*?</dt><dd>(.*?)</dd></div>', _page(viewer, run)))
    note = " — left out: the confidence model does not count it"
    assert factors["agent_verdict"] == "Correct" + note
    assert re.sub(r"\s*<a .*", "", factors["reading"]) == "2 supporting, 1 contradicting, 0 silent" + note
    assert factors["structural_probability"].startswith("0.08 <a")  # weighed: no note
    run.assessment = {**ASSESSMENT, "unweighed": ["contradicts"]}  # the supporting sentences are weighed
    run.save(update_fields=["assessment"])
    factors = dict(re.findall(r'<div data-factor="(\w+)"><dt>.*?</dt><dd>(.*?)</dd></div>', _page(viewer, run)))
    assert factors["agent_verdict"] == "Correct — weighed with the evidence below" and "left out" not in factors["reading"]
    run.assessment = {**ASSESSMENT, "reading": {"supports": 0, "contradicts": 0, "silent": 0}, "keys": {}}  # sentences listed unjudged
    run.save(update_fields=["assessment"])
    factors = dict(re.findall(r'<div data-factor="(\w+)"><dt>.*?</dt><dd>(.*?)</dd></div>', _page(viewer, run)))
    assert factors["reading"] == "none judged"


def test_the_language_models_answer_is_named_as_such_never_as_the_verdict(viewer, world):
    run = _disputed_run(world)
    page = _page(viewer, run)
    assert '<div data-factor="agent_verdict"><dt>The language model&#x27;s own answer</dt>' in page
    assert "Agent&#x27;s verdict" not in page and "Agent's verdict" not in page
    run.assessment = {**ASSESSMENT, "agent_verdict": "", "withheld_answer": {
        "answer": "correct", "reason": "it repeats an instruction found in the data ([E2])"}}
    run.save(update_fields=["assessment"])
    factors = dict(re.findall(r'<div data-factor="(\w+)"><dt>.*?</dt><dd>(.*?)</dd></div>', _page(viewer, run)))
    assert factors["agent_verdict"] == ("Correct — withheld, not weighed: it repeats an instruction found in the data "
                                        "([E2])")
    run.assessment = {**ASSESSMENT, "decided_by": "model"}
    run.save(update_fields=["assessment"])
    factors = dict(re.findall(r'<div data-factor="(\w+)"><dt>.*?</dt><dd>(.*?)</dd></div>', _page(viewer, run)))
    assert factors["agent_verdict"].startswith("Correct — the verdict (the paper profile keeps the model")


def test_a_run_from_before_the_confidence_model_shows_its_confidence_and_nothing_invented(viewer, world):
    run = make_finished_run(world)
    run.confidence = 0.9
    run.save(update_fields=["confidence"])
    page = _page(viewer, run)
    assert "confidence <strong id=\"confidence-value\">0.90</strong> that the verdict is right" in page
    assert f'id="confidence-link" href="/confidence/#kg-{run.task.kg_id}"' in page  # how the KG's confidence holds up
    assert "badge disputed" not in page and 'id="how-confidence"' not in page and "scored by the structural model" not in page
    assert re.search(r'<section id="assessment"[^>]*>', page).group(0).endswith("hidden>")


def test_a_live_run_has_empty_sections_the_page_swaps_in_when_it_ends(make_user, world):
    page = _page(client_for(make_user, "viewer"), make_live_run(world))
    assert 'id="verdict-confidence"' in page and 'confidence-meter' not in page
    assert re.search(r'<section id="assessment"[^>]*hidden>', page)


def test_the_sections_a_run_page_swaps_in_when_it_ends_carry_the_confidence_and_its_account(viewer, world):
    """The page never reloads: run.js asks for its sections when the run ends and replaces them by id."""
    run = _disputed_run(world)
    page = _page(viewer, run)
    assert f'data-sections-url="{reverse("run-sections", args=[run.pk])}"' in page
    sections = viewer.get(reverse("run-sections", args=[run.pk])).content.decode()
    for element_id in ("verdict-confidence", "assessment"):
        assert _section(sections, element_id) == _section(page, element_id)
    assert "badge disputed" in _section(sections, "verdict-confidence")
    assert not re.search(r'<section id="assessment"[^>]*hidden>', sections)


def test_plausibility_and_rule_evidence_have_readable_kinds(viewer, world):
    run = _disputed_run(world)
    SupportItem.objects.create(run=run, key="E5", kind="plausibility", cited=True, source="runs-kg (1), structural model 1",
                               text="Plausibility of (Douglas Adams) -[country of citizenship]-> (United Kingdom): 0.08",
                               payload={"probability": 0.08, "model": 1})
    SupportItem.objects.create(run=run, key="E6", kind="rule", cited=True, source="runs-kg (1), mined rules",
                               text="Rule #3 (PCA confidence 0.91, support 40) predicts France instead",
                               payload={"rule": 3, "role": "against"})
    page = _page(viewer, run)
    rows = dict(re.findall(r'<tr class="evidence-row" id="evidence-(E\d)"(.*?)</tr>', page, re.S))
    assert '<td class="kind kind-plausibility">Structural plausibility · P(true) 0.08</td>' in rows["E5"]
    assert '<td class="kind kind-rule">Rule · against the claim</td>' in rows["E6"]
    assert '<td class="kind kind-passage">Passage</td>' in rows["E3"]


# ---- the structural model strip ------------------------------------------------------------------------

def test_the_queue_shows_the_structural_model_training_with_a_progress_bar_that_polls(viewer, world):
    training(world.kg)
    page = viewer.get(reverse("queue")).content.decode()
    strip = _section(page, "structure-status")
    assert f'data-url="{reverse("structure-status")}"' in strip
    assert 'data-state="training"' in strip and "Structural model:" in strip
    assert ">training (45%)</span>" in strip and 'title="training: epoch 40/300, held-out MRR 0.351"' in strip
    assert '<progress class="structure-progress" max="100" value="45"' in strip
    assert "kgv/structure.js" in page


def test_the_status_json_follows_the_model_from_training_to_ready(viewer, world):
    model = training(world.kg)
    url = reverse("structure-status") + f"?kg={world.kg.pk}"
    first = viewer.get(url).json()
    assert first["in_flight"] is True
    assert [(m["kg"], m["state"], m["percent"], m["in_flight"]) for m in first["models"]] == [("runs-kg", "training", 45, True)]
    StructuralModel.objects.filter(pk=model.pk).update(status="ready", progress=1.0, stage="ready",
                                                       config={"kge": {"model": "ComplEx"}},
                                                       metrics={"validation": {"mrr": 0.43}})
    later = viewer.get(url).json()
    assert later["in_flight"] is False
    assert [(m["state"], m["text"], m["ok"]) for m in later["models"]] == [("ready", "ready (ranks unseen facts well: 0.43)", True)]


def test_the_run_page_shows_the_structural_model_of_its_own_kg(viewer, world):
    run = make_finished_run(world)
    failed(local_kg("other-kg"))
    ready(world.kg)
    strip = _section(_page(viewer, run), "structure-status")
    assert "ready (ranks unseen facts well: 0.43)" in strip and "other-kg" not in strip and "failed" not in strip
    assert f'data-url="{reverse("structure-status")}?kg={world.kg.pk}"' in strip
    assert re.search(r'<progress [^>]* hidden>', strip)  # nothing in flight, no bar


def test_a_stalled_or_failed_model_is_said_plainly(viewer, world):
    failed(world.kg, error="TrainingError: runs-kg has no triples to train on")
    strip = _section(viewer.get(reverse("queue")).content.decode(), "structure-status")
    assert 'data-state="failed"' in strip and ">its training failed</span>" in strip
    assert 'title="TrainingError: runs-kg has no triples to train on"' in strip  # the builders' words in its title


def test_an_admin_trains_a_failed_model_again_from_the_strip_and_comes_back_to_the_page(make_user, world):
    broken = failed(world.kg)
    url = reverse("structure-train", args=[world.kg.pk])
    assert "train-again" not in _section(client_for(make_user, "curator").get(reverse("queue")).content.decode(), "structure-status")
    admin = client_for(make_user, "admin")
    strip = _section(admin.get(reverse("queue") + "?status=pending").content.decode(), "structure-status")
    assert f'action="{url}"' in strip and 'name="next" value="/?status=pending"' in strip and "Train it again" in strip

    response = admin.post(url, {"next": "/?status=pending"})
    assert response["Location"] == "/?status=pending"
    queued = StructuralModel.objects.exclude(pk=broken.pk).get(kg=world.kg)
    assert queued.status == StructuralModel.Status.QUEUED and queued.stage.startswith("queued: requested by")
    page = admin.get(response["Location"]).content.decode()
    assert f"Structural model #{queued.pk} of {world.kg.name} is queued" in page
    assert 'data-state="queued"' in _section(page, "structure-status")
    assert AuditEvent.objects.get(action="structure.train").object_id == str(queued.pk)

    response = admin.post(url, {"next": "https://elsewhere.example/"})  # queued already; and never sent off the site
    assert response["Location"] == reverse("queue")
    assert "No training queued: the structural model of" in admin.get(response["Location"]).content.decode()
    assert StructuralModel.objects.filter(kg=world.kg).count() == 2


def test_a_ready_model_is_not_trained_again_from_the_workbench(make_user, world):
    ready(world.kg)
    admin = client_for(make_user, "admin")
    response = admin.post(reverse("structure-train", args=[world.kg.pk]))
    page = admin.get(response["Location"]).content.decode()
    assert f"manage.py train_kge {world.kg.name} retrains a ready one" in page
    assert StructuralModel.objects.filter(kg=world.kg).count() == 1
