"""A queue row follows its run without a reload, and becomes the row a reload would show: the server renders it
(templates/verifier/queue_row.html) for the page and for its live updates alike, so the verdict's quality badges
arrive with the verdict, and a row the curator ticked stays ticked."""

from __future__ import annotations

import pytest

from tests.browser.conftest import sign_in
from tests.browser.test_workbench import task_of
from tests.users import PASSWORD
from tests.workers import wait_for
from verifier.memory import bank
from verifier.models import Run, VerificationTask
from verifier.services import start_run

pytestmark = pytest.mark.django_db(transaction=True)

FINISH_TIMEOUT_MS = 60_000


def test_a_live_queue_row_gets_its_verdict_with_its_quality_badges_and_keeps_its_tick(browser_context, world_kg,
                                                                                      make_user, scripted_model):
    curator = make_user("curator", username="quentin")
    # A memory of the relation about other entities, close enough to guide the run: its verdict is flagged for it.
    bank.add_entry(triple_text="Cambridge country United Kingdom", trajectory="Thought: the KG states it.",
                   verdict="correct", relation_label="country", kg=world_kg)
    task = task_of(world_kg, "Q90", "P17", "Q142")
    model = scripted_model.investigator
    claim = f"{task.head.label} — {task.relation.label} — {task.tail.label}"
    model.hold(claim)  # the run stays in flight while the page opens
    try:
        run = start_run(task=task, actor=curator)
        page = sign_in(browser_context, "quentin", PASSWORD)
        page.goto("/")
        row = page.locator(f"#task-row-{task.pk}")
        assert row.get_attribute("data-live") == "true"
        assert row.locator("[data-signal]").count() == 0 and row.locator("[data-field=verdict] .badge").count() == 0
        row.locator("input.row-check").check()
        page.evaluate("window.__sameDocument = true")  # gone if the page reloads instead of swapping the row
    finally:
        model.release(claim)

    finished = page.locator(f"#task-row-{task.pk}:not([data-live]) [data-field=verdict] .badge.verdict-correct")
    finished.wait_for(timeout=FINISH_TIMEOUT_MS)
    run = wait_for(lambda: Run.objects.filter(pk=run.pk, status=Run.Status.SUCCEEDED).first(), 10, "the run's end")
    assert "memory_other" in run.signals, run.signals  # what the row must show
    row = page.locator(f"#task-row-{task.pk}")
    shown = row.locator("[data-field=verdict] .badge.signal").evaluate_all("els => els.map(e => e.dataset.signal)")
    assert shown == run.signals
    assert row.locator("[data-signal=memory_other]").inner_text() == "⚠ memory of other entities"
    assert row.locator("[data-field=status] .badge").inner_text() == VerificationTask.objects.get(pk=task.pk).get_status_display()
    assert row.locator("[data-field=verdict] a.verdict-correct").get_attribute("href") == f"/runs/{run.pk}/"
    assert row.locator("input.row-check").is_checked() and "ticked" in row.get_attribute("class")
    assert page.inner_text("#selected-count") == "1 selected"
    assert page.evaluate("window.__sameDocument") is True

    page.reload()  # the row a reload shows is the row the page swapped in
    reloaded = page.locator(f"#task-row-{task.pk} [data-field=verdict] .badge.signal")
    assert reloaded.evaluate_all("els => els.map(e => e.dataset.signal)") == shown
