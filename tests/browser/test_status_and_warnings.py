"""What tells a curator how the service is doing without asking: the top bar's service line (is the model
answering, how deep is the run queue and why runs wait; a queued run's own page is tests/browser/test_live_state.py),
and an evaluation page's warning when the outcome is degenerate."""

from __future__ import annotations

import pytest

from tests.browser.conftest import sign_in
from tests.browser.test_workbench import task_of
from tests.users import PASSWORD
from verifier.evaluation import metrics
from verifier.evaluation.metrics import Outcome
from verifier.models import Evaluation, Run

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_top_bar_says_how_many_runs_wait_and_why(browser_context, world_kg, make_user):
    curator = make_user("curator", username="quinn")
    # Runs recorded as queued whose message has not reached the workers: they are waiting to be handed over.
    for tail in ("Q145", "Q142"):
        Run.objects.create(task=task_of(world_kg, "Q42", "P27", tail), status=Run.Status.QUEUED, created_by=curator)

    page = sign_in(browser_context, "quinn", PASSWORD)
    page.goto("/")
    status = page.locator("#service-status[data-state=up]")
    status.wait_for()
    depth = status.locator(".depth").inner_text()  # 1,400 px: the model's name is in the title
    assert depth == "2 queued · 0 running (2 are being handed to a verification worker)", depth
    assert "The model scripted answers" in status.get_attribute("title")


def _evaluation(kg, name: str, verdicts: list[str]) -> Evaluation:
    """Twenty verifications, the even ones of true triples, answered with ``verdicts``."""
    outcomes = [Outcome(triple=i, relation="P27", expected=i % 2 == 0, verdict=v, confidence=0.9) for i, v in enumerate(verdicts)]
    return Evaluation.objects.create(
        name=name, suite="browser", kg=kg, benchmark="labelled.tsv", sample_size=len(verdicts), mode="agent",
        status=Evaluation.Status.FINISHED, metrics={**metrics.compute(outcomes), "pending": 0, "models": ["scripted"]})


def test_an_evaluation_that_answered_correct_every_time_is_flagged_on_its_page(browser_context, world_kg, make_user):
    make_user("viewer", username="vera")
    degenerate = _evaluation(world_kg, "always-correct", ["correct"] * 20)
    sound = _evaluation(world_kg, "sound", ["correct" if i % 2 == 0 or i % 5 == 1 else "incorrect" for i in range(20)])

    page = sign_in(browser_context, "vera", PASSWORD)
    page.goto(f"/evaluations/{degenerate.pk}/")
    alerts = page.get_by_role("alert").all_inner_texts()
    assert any(text.startswith("Warning: Answered Correct for 20 of 20") for text in alerts), alerts
    page.goto(f"/evaluations/{sound.pk}/")
    assert page.get_by_role("alert").count() == 0
