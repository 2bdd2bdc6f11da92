"""A run page opened before its run starts tells the truth at every moment, without a reload: queued with its place
in the workers' line and why it waits, the place counting down as the runs queued before it start, running with its
time counting, then finished with its verdict, the "queued" message gone.

The session's Celery worker has four slots; four runs whose model calls the scripted model holds keep them busy
until the test lets each go (tests/browser/model.py)."""

from __future__ import annotations

import pytest

from tests.browser.conftest import sign_in
from tests.browser.test_workbench import task_of
from tests.users import PASSWORD
from tests.workers import wait_for
from verifier.models import Run
from verifier.services import start_run

pytestmark = pytest.mark.django_db(transaction=True)

# Four claims of the world KG that keep the worker's four slots busy while the model holds them.
BLOCKERS = [("Q90", "P17", "Q142"), ("Q25", "P131", "Q145"), ("Q350", "P17", "Q145"), ("Q145", "P47", "Q142")]
STEP_TIMEOUT_MS = 40_000


def _in_words(task) -> str:
    return f"{task.head.label} — {task.relation.label} — {task.tail.label}"


def test_a_run_page_opened_before_its_run_starts_shows_each_state_in_order(browser_context, world_kg, make_user,
                                                                         scripted_model):
    curator = make_user("curator", username="lena")
    model = scripted_model.investigator
    try:
        blockers = []
        for triple in BLOCKERS:
            task = task_of(world_kg, *triple)
            model.hold(_in_words(task))
            blockers.append((_in_words(task), start_run(task=task, actor=curator)))
        wait_for(lambda: Run.objects.filter(pk__in=[run.pk for _, run in blockers], status="running").count() == 4, 30,
                 "four held runs in the worker's four slots")
        first = start_run(task=task_of(world_kg, "Q42", "P27", "Q145"), actor=curator)

        page = sign_in(browser_context, "lena", PASSWORD)
        page.goto(f"/tasks/{task_of(world_kg, 'Q42', 'P19', 'Q350').pk}/")
        page.click("#start-button")  # queued behind the first: its page opens before it starts
        page.wait_for_selector("#run-page")
        second = Run.objects.get(task__head__external_id="Q42", task__relation__external_id="P19")
        assert page.inner_text("#run-status") == "Queued" and page.inner_text("#verdict") == "Not started yet"
        assert page.inner_text("#queue-position").startswith("2nd in the queue")
        assert page.inner_text("#elapsed") == "not started"
        assert page.locator(".messages li.run-queued").count() == 1
        reason = page.locator("#wait-reason", has_text="all 4 verification slots are busy")
        reason.wait_for(timeout=STEP_TIMEOUT_MS)
        assert reason.inner_text() == "Waiting: all 4 verification slots are busy, 1 run ahead of it."

        model.release(blockers[0][0])  # a slot frees: the run queued first takes it, and this one moves up
        page.locator("#queue-position", has_text="1st in the queue").wait_for(timeout=STEP_TIMEOUT_MS)
        assert Run.objects.get(pk=first.pk).status != Run.Status.QUEUED
        assert Run.objects.get(pk=second.pk).status == Run.Status.QUEUED
        assert page.inner_text("#run-status") == "Queued"
        page.locator("#wait-reason", has_text="it is next").wait_for(timeout=STEP_TIMEOUT_MS)

        model.release(blockers[1][0])  # another slot frees: this run starts
        page.locator("#run-status[data-status=running]").wait_for(timeout=STEP_TIMEOUT_MS)
        assert page.inner_text("#run-status") == "Running"
        assert page.locator("#queue-position").is_hidden() and page.locator("#wait-reason").is_hidden()
        assert page.locator(".messages li.run-queued").count() == 0
        page.locator("#elapsed:not([data-seconds=''])").wait_for()
        assert page.inner_text("#elapsed").endswith(" s")

        page.locator("#run-page[data-state=finished]").wait_for(timeout=STEP_TIMEOUT_MS)
        assert page.inner_text("#run-status") == "Succeeded"
        assert page.inner_text("#verdict") == "Correct"
        assert page.get_attribute("#run-page", "data-verdict") == "correct"
        border = page.eval_on_selector(".step.kind-verdict", "e => getComputedStyle(e).borderLeftColor")
        assert border == "rgb(26, 127, 55)", border  # the verdict step is green for Correct, not red
        assert page.locator(".messages li.run-queued").count() == 0
        assert Run.objects.get(pk=second.pk).status == Run.Status.SUCCEEDED
    finally:
        model.release()
    wait_for(lambda: not Run.objects.in_flight().exists(), 60, "the held runs to end")
