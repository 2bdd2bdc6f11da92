"""The reviewer's and the curator's day in a real browser, for what the other browser tests do not walk:
decide with a key and land on the next task awaiting review in the filtered queue, undo that decision; decide without
seeing the gold label, and override from the keyboard; an import that
names the KG's closest names for a misspelt one; the entity look-up; quality signals and the evaluation
triples kept out of the work queue."""

from __future__ import annotations

import re

import pytest

from tests.browser.conftest import sign_in
from tests.browser.test_workbench import finished_run, task_of
from tests.users import PASSWORD
from tests.workers import wait_for
from verifier.models import Review, Run, VerificationTask

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_reviewer_decides_with_a_key_lands_on_the_next_task_and_undoes_it(browser_context, world_kg, make_user):
    curator = make_user("curator", username="cora")
    make_user("reviewer", username="rita")
    older = finished_run(task_of(world_kg, "Q42", "P27", "Q145"), curator)
    newer = finished_run(task_of(world_kg, "Q42", "P19", "Q350"), curator)
    page = sign_in(browser_context, "rita", PASSWORD)
    page.goto("/?status=verified")  # a filtered view, newest first: the newer task, then the older
    # The verdict badge opens the run in the filtered view, as the triple link does.
    page.locator(f"#queue-table tbody tr[data-task-id='{newer.task_id}'] td[data-field=verdict] a.badge").click()
    page.wait_for_selector("#run-page")
    assert page.is_checked("#review-advance")  # deciding opens the next task by default

    page.keyboard.press("a")  # accept the agent's verdict
    page.wait_for_url(re.compile(rf"/(tasks/{older.task_id}|runs/{older.pk})/"), timeout=30_000)  # the next task
    review = wait_for(lambda: Review.objects.filter(run=newer).first(), 10, "the accept")
    assert review.decision == "accept" and "queue=status%3Dverified" in page.url  # still in the filtered view
    assert "this is the next task awaiting review" in page.inner_text(".messages")

    page.click("#undo-button")
    wait_for(lambda: not Review.objects.filter(run=newer).exists(), 10, "the undo")
    page.goto(f"/runs/{newer.pk}/")
    assert page.get_attribute("#review-state", "data-state") == "unreviewed"
    assert Run.objects.get(pk=newer.pk).task.status == VerificationTask.Status.VERIFIED


def test_a_curator_finds_names_sees_signals_and_keeps_evaluation_triples_apart(browser_context, world_kg, make_user,
                                                                                 tmp_path):
    curator = make_user("curator", username="cora")
    run = finished_run(task_of(world_kg, "Q42", "P27", "Q145"), curator)
    Run.objects.filter(pk=run.pk).update(signals=["cites_nothing"])
    benchmark = task_of(world_kg, "Q42", "P19", "Q350")
    VerificationTask.objects.filter(pk=benchmark.pk).update(source="evaluation:codex-kge-400")
    page = sign_in(browser_context, "cora", PASSWORD)

    misspelt = tmp_path / "flagged.csv"
    misspelt.write_text("head,relation,tail\nDouglas Adms,country of citizenship,United Kingdom\n", encoding="utf-8")
    page.goto("/import/")
    page.select_option("select[name=kg]", label=world_kg.name)
    page.set_input_files("input[name=file]", str(misspelt))
    page.click("#import-form button[type=submit]:not(#preview-button)")
    page.wait_for_selector(".error")
    assert "did you mean Douglas Adams" in page.inner_text("main")
    assert VerificationTask.objects.count() == 2  # nothing queued from a file with a bad line

    page.goto("/entities/")
    page.fill("#entity-form input[name=q]", "Douglas Adms")
    page.keyboard.press("Enter")
    page.wait_for_selector("main table tbody tr")
    assert "Douglas Adams" in page.inner_text("main table tbody tr >> nth=0")

    page.goto("/")
    rows = page.locator("#queue-table tbody tr[data-task-id]")
    assert [int(r) for r in rows.evaluate_all("rs => rs.map(r => r.dataset.taskId)")] == [run.task_id]  # work only
    assert page.locator(f"#queue-table tr[data-task-id='{run.task_id}'] [data-signal=cites_nothing]").count() == 1
    page.goto("/?origin=all")
    assert page.locator(f"#queue-table tr[data-task-id='{benchmark.pk}']").count() == 1
    page.goto("/?signal=cites_nothing&origin=all")
    assert page.locator("#queue-table tbody tr[data-task-id]").count() == 1


def test_a_reviewer_sees_no_gold_label_or_benchmark_source_before_deciding_and_overrides_from_the_keyboard(
        browser_context, world_kg, make_user):
    curator = make_user("curator", username="cora")
    make_user("reviewer", username="rita")
    make_user("admin", username="ada")
    task = task_of(world_kg, "Q42", "P27", "Q145")
    VerificationTask.objects.filter(pk=task.pk).update(expected_label=False, source="valid_negatives.txt:1383")
    run = finished_run(task, curator)

    page = sign_in(browser_context, "rita", PASSWORD)
    for path in ("/", f"/runs/{run.pk}/"):  # the queue's row and the run: neither the label nor the file that gives it
        page.goto(path)
        html = page.content()
        assert "gold" not in page.inner_text("main") and "valid_negatives" not in html, path
    page.uncheck("#review-advance")
    page.fill("#review-reason", "The passages name Cambridge, not a citizenship.")
    page.keyboard.press("Control+Enter")  # sends the reason as an override, no mouse needed
    page.wait_for_selector("#review-state[data-state=overridden]")
    review = Review.objects.get(run=run)
    assert (review.decision, review.verdict) == ("override", "incorrect")
    assert page.inner_text("#gold-label") == "gold label incorrect"  # once decided, the label is there to learn from
    assert "valid_negatives.txt:1383" in page.inner_text("#claim-row")

    browser_context.clear_cookies()  # an administrator sees them at any time
    admin = sign_in(browser_context, "ada", PASSWORD)
    admin.goto("/")
    assert admin.locator(f"#queue-table tr[data-task-id='{task.pk}'] .gold").inner_text() == "gold: incorrect"
