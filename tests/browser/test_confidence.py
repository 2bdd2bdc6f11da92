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
from verifier.models import Run, Step, StructuralModel
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
    page.wait_for_function("document.getElementById('connection').textContent.includes('Live')")
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
    model = training(world_kg)
    page = sign_in(browser_context, "vic", PASSWORD)
    page.goto("/")
    line = page.locator(f"#structure-status .structure-model[data-kg-id='{world_kg.pk}']")
    assert "training 45% (epoch 40/300, held-out MRR 0.351)" in line.inner_text()
    assert line.locator("progress").is_visible()
    shoot(page, "structure-training")
    page.evaluate("window.__sameDocument = true")

    StructuralModel.objects.filter(pk=model.pk).update(status="ready", progress=1.0, stage="ready",
                                                       config={"kge": {"model": "ComplEx"}}, metrics={"validation": {"mrr": 0.43}})
    page.wait_for_selector(f"#structure-status .structure-model[data-kg-id='{world_kg.pk}'][data-state=ready]")
    assert "ready: ComplEx, held-out MRR 0.430" in line.inner_text() and line.locator("progress").is_hidden()
    assert page.evaluate("window.__sameDocument") is True
