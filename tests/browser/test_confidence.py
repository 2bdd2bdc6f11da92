"""The confidence of a verdict and the structural model in a real browser: the run page swaps the
confidence and the dispute in when the run ends (no reload), and the structural model strip follows a
training job from "training 45%" to "ready" by polling."""

from __future__ import annotations

import pytest
from django.utils import timezone

from tests.browser.conftest import sign_in
from tests.browser.test_workbench import shoot, task_of
from tests.users import PASSWORD
from tests.verifier.web.structure_rows import ready, training
from verifier.models import Evaluation, Run, Step, StructuralModel
from verifier.realtime.publish import publish_run_status

pytestmark = pytest.mark.django_db(transaction=True)

ASSESSMENT = {"p_true": 0.21, "agent_verdict": "correct", "structural_probability": 0.06, "rule_probability": None,
              "reading": {"supports": 2, "contradicts": 0, "silent": 1}, "confidence_model": None,
              "disputed_reason": "The structural model gives the triple 0.06 while the agent says Correct."}


def test_the_run_page_swaps_in_the_confidence_and_the_dispute_when_the_run_ends(browser_context, world_kg, make_user):
    make_user("viewer", username="vera")
    model = ready(world_kg)
    run = Run.objects.create(task=task_of(world_kg, "Q42", "P27", "Q145"), status=Run.Status.RUNNING, started_at=timezone.now())
    Step.objects.create(run=run, seq=1, kind="plan", content="=== Initial Impression ===\n[Correct]")
    page = sign_in(browser_context, "vera", PASSWORD)
    page.goto(f"/runs/{run.pk}/")
    page.wait_for_selector("#connection:has-text('Live')")
    page.evaluate("window.__sameDocument = true")
    assert page.locator("#confidence-meter").count() == 0 and page.locator("#assessment").is_hidden()

    Step.objects.create(run=run, seq=2, kind="verdict", content="[Correct] Because he was a British citizen.")
    Run.objects.filter(pk=run.pk).update(status=Run.Status.SUCCEEDED, verdict="correct", finished_at=timezone.now(),
                                         confidence=0.71, disputed=True, assessment=ASSESSMENT, structural_model=model)
    publish_run_status(Run.objects.get(pk=run.pk))

    page.wait_for_selector("#confidence-meter")
    assert "confidence 0.71 that the verdict is right" in " ".join(page.inner_text("#verdict-confidence").split())
    assert page.locator("#disputed-badge").is_visible() and page.locator("#assessment").is_visible()
    assert ASSESSMENT["disputed_reason"] in page.inner_text("#disputed-reason")
    assert "0.06" in page.inner_text("#how-confidence") and f"model #{model.pk}" in page.inner_text("#scoring-model")
    assert page.evaluate("window.__sameDocument") is True
    shoot(page, "confidence")


def test_the_structural_model_strip_follows_training_to_ready_without_a_reload(browser_context, world_kg, make_user):
    make_user("viewer", username="vic")
    model = training(world_kg, stage="training: network 3 of 5, epoch 40/300, held-out MRR 0.351 — about 6 min left")
    page = sign_in(browser_context, "vic", PASSWORD)
    page.goto("/")
    line = page.locator(f"#structure-status .structure-model[data-kg-id='{world_kg.pk}']")
    assert "Structural model: training (45%), about 6 min left" in " ".join(line.inner_text().split())  # the curator's words
    assert line.locator(".structure-text").get_attribute("title").startswith("training: network 3 of 5")  # the job's
    assert line.locator("progress").is_visible()
    shoot(page, "structure-training")
    page.evaluate("window.__sameDocument = true")

    StructuralModel.objects.filter(pk=model.pk).update(status="ready", progress=1.0, stage="ready",
                                                       config={"kge": {"model": "ComplEx"}}, metrics={"validation": {"mrr": 0.43}})
    page.wait_for_selector(f"#structure-status .structure-model[data-kg-id='{world_kg.pk}'][data-state=ready]")
    assert "ready (ranks unseen facts well: 0.43)" in line.inner_text() and line.locator("progress").is_hidden()
    assert line.locator(".structure-text").get_attribute("title") == "ComplEx, held-out MRR 0.430"
    assert page.evaluate("window.__sameDocument") is True


def test_the_confidence_page_follows_the_calibration_triples_to_the_fit_button(browser_context, weighed_by_every_kg, make_user):
    """The verification of a KG's calibration triples, as the worker records it, shows on the confidence page without a
    reload; when it has finished the page comes back with the button that fits a model on them."""
    from verifier.evaluation.labelled import calibration_evaluation

    kg, structural, _ = weighed_by_every_kg
    make_user("admin", username="ada")
    evaluation = calibration_evaluation(structural)  # drawn, not handed to the worker: this test plays the worker
    Evaluation.objects.filter(pk=evaluation.pk).update(status=Evaluation.Status.RUNNING)
    total = evaluation.items.count()
    page = sign_in(browser_context, "ada", PASSWORD)
    page.goto("/confidence/")
    line = page.locator(f"section[data-kg='{kg.name}'] .own-progress")
    assert f"running, 0 of {total} verified." in " ".join(line.inner_text().split())
    page.evaluate("window.__sameDocument = true")

    for item in evaluation.items.select_related("task")[:3]:
        item.run = Run.objects.create(task=item.task, status=Run.Status.SUCCEEDED, verdict="correct", config={"mode": "evidence"})
        item.save(update_fields=["run"])
    page.wait_for_selector(f".own-progress .own-verified:text-is('3 of {total}')")
    assert page.evaluate("window.__sameDocument") is True
    shoot(page, "own-weighing-progress")

    Evaluation.objects.filter(pk=evaluation.pk).update(status=Evaluation.Status.FINISHED)
    page.wait_for_selector(f"section[data-kg='{kg.name}'] form.fit-calibration button")
    assert f"Fit a model on its {total} verified calibration triples" in page.inner_text(f"section[data-kg='{kg.name}']")


def test_an_admin_trains_a_failed_model_again_from_the_strip_and_follows_the_new_job(browser_context, make_user):
    """The button appears where no model serves the KG; the worker takes the new job at once (this KG has nothing to
    train on, so it fails fast and the button comes back) and the strip follows it without a reload."""
    from tests.verifier.web.structure_rows import failed, local_kg

    kg = local_kg("empty-kg")
    broken = failed(kg, error="TrainingError: out of memory")
    make_user("admin", username="ines")
    page = sign_in(browser_context, "ines", PASSWORD)
    page.goto("/?status=pending")
    line = page.locator(f"#structure-status .structure-model[data-kg-id='{kg.pk}']")
    button = line.get_by_role("button", name="Train it again")
    assert "its training failed" in line.inner_text() and button.is_visible()
    assert line.locator(".structure-text").get_attribute("title") == "TrainingError: out of memory"  # the job's words
    shoot(page, "structure-failed")
    button.click()
    page.wait_for_url("**/?status=pending")
    assert "is queued" in page.inner_text("main")
    page.wait_for_selector(f"#structure-status .structure-model[data-kg-id='{kg.pk}'][data-state=failed]", timeout=60_000)
    assert "empty-kg has no triples to train on" in line.locator(".structure-text").get_attribute("title")
    assert button.is_visible()
    retried = StructuralModel.objects.exclude(pk=broken.pk).get(kg=kg)
    assert retried.status == StructuralModel.Status.FAILED and "no triples to train on" in retried.error
