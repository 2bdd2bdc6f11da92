"""What changed and who hears of it, in a real browser: an admin registers a webhook and tests it, a curator
re-verifies a triple and compares the two runs side by side, the receiver hears of both runs without polling,
the curator keeps the queue's filters as a saved view and weighs a ticked task's evidence without the model."""

from __future__ import annotations

import pytest

from tests.browser.conftest import sign_in
from tests.browser.test_workbench import finished_run, shoot, task_of
from tests.http_fixtures import LocalHTTPServer, Reply
from tests.users import PASSWORD
from tests.verifier.test_webhooks import signature_is_valid
from tests.workers import wait_for
from verifier import confidence
from verifier.models import Run, SavedView, VerificationTask, Webhook, WebhookDelivery

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_re_verification_is_compared_in_the_browser_and_announced_to_a_webhook(browser_context, world_kg, make_user):
    make_user("admin", username="ada")
    curator = make_user("curator", username="cora")
    with LocalHTTPServer() as receiver:
        receiver.route("/kgv", Reply({"ok": True}))
        admin = sign_in(browser_context, "ada", PASSWORD)
        admin.goto("/webhooks/")
        admin.fill("#webhook-form input[name=url]", receiver.url + "/kgv")
        admin.check("#webhook-form input[value='run.finished']")
        admin.fill("#webhook-form input[name=description]", "curation pipeline")
        admin.click("#webhook-form button[type=submit]")
        hook = wait_for(lambda: Webhook.objects.first(), 10, "the webhook")
        assert hook.secret in admin.inner_text(".messages")  # shown this once
        admin.click(f"#webhook-{hook.pk} .test-button")
        admin.wait_for_selector(".messages >> text=Test delivered")
        assert signature_is_valid(receiver.requests[-1], hook.secret)

        task = task_of(world_kg, "Q42", "P27", "Q145")
        first, second = finished_run(task, curator), finished_run(task, curator)
        def run_events():
            return [r for r in receiver.requests if r.header("KGV-Event") == "run.finished"]

        finished = wait_for(lambda: len(run_events()) == 2 and run_events(), 30, "two run.finished deliveries")
        assert sorted(r.json()["data"]["run"] for r in finished) == [first.pk, second.pk]
        assert all(signature_is_valid(r, hook.secret) for r in finished)
        wait_for(lambda: WebhookDelivery.objects.filter(webhook=hook, status="delivered").count() == 3, 10,
                 "the test and both runs logged as delivered")
        admin.goto("/webhooks/")
        assert admin.locator(f"#webhook-{hook.pk} tr.delivery-delivered").count() == 3

    browser_context.clear_cookies()  # sign out the admin
    page = sign_in(browser_context, "cora", PASSWORD)
    page.goto(f"/runs/{second.pk}/")
    page.click(".other-runs .compare-link")
    page.wait_for_selector("#compare-title")
    assert page.inner_text("#compare-title") == f"What changed from run {first.pk} to run {second.pk}"
    summary = page.inner_text("#compare-summary")
    assert "Same verdict" in summary and "added" in summary and "kept" in summary
    assert page.locator("#step-changes tbody tr").count() == max(first.steps.count(), second.steps.count())
    shoot(page, "compare")

    confidence.seed_shipped_models()  # what weighs the evidence, as `make demo` puts it in force: the queue offers it
    page.goto("/?verdict=correct&sort=confidence")
    page.fill("#save-view-form input[name=name]", "correct, least confident")
    page.click("#save-view-form button[type=submit]")
    page.wait_for_selector("#saved-views a >> text=correct, least confident")
    assert SavedView.objects.get(user=curator).query == "verdict=correct&sort=confidence"
    page.goto("/")
    page.click("#saved-views a >> text=correct, least confident")
    page.wait_for_load_state()
    assert page.url.endswith("/?verdict=correct&sort=confidence"), page.url
    assert page.locator("#filters select[name=verdict]").input_value() == "correct"
    page.locator("input.row-check").first.check()  # ticking tasks estimates what running them takes
    assert page.inner_text("#run-estimate").startswith("running them: about ")
    page.select_option("#bulk-kind", "evidence")  # no evidence-only run yet: no basis for an estimate
    assert page.inner_text("#run-estimate") == ""
    ticked = int(page.locator("input.row-check:checked").first.get_attribute("value"))
    page.click("#bulk-form button[value=run]")
    page.wait_for_selector(".messages >> text=1 run(s) weighing the evidence only queued")
    weighed = wait_for(lambda: Run.objects.filter(task_id=ticked, config__mode="evidence", status__in=["succeeded", "failed"]).first(),
                       60, "the evidence-only run")
    assert weighed.status == Run.Status.SUCCEEDED, weighed.error
    steps = list(weighed.steps.all())
    assert steps[-1].kind == "verdict" and sum(step.prompt_tokens for step in steps) == 0  # no model asked


def test_a_curator_weighs_every_task_of_a_view_longer_than_a_page_in_one_action(browser_context, world_kg, make_user,
                                                                                 shipped_weighing):
    make_user("curator", username="cleo")
    entities, relations = list(world_kg.entities.all()), list(world_kg.relations.all())
    triples = [(h, r, t) for h in entities for r in relations for t in entities if h != t][:30]
    VerificationTask.objects.bulk_create(VerificationTask(kg=world_kg, head=h, relation=r, tail=t) for h, r, t in triples)
    page = sign_in(browser_context, "cleo", PASSWORD)
    page.goto("/?per_page=25")
    assert page.locator("#select-matching").is_hidden()
    page.check("#select-all")
    assert page.inner_text("#select-matching-text") == "All 25 on this page are ticked."
    page.click("#select-matching-button")
    assert page.inner_text("#selected-count") == "30 selected"
    assert page.inner_text("#select-matching-text") == "All 30 of this view are ticked."
    page.select_option("#bulk-kind", "evidence")
    page.click("#bulk-form button[value=run]")
    page.wait_for_selector(".messages >> text=30 run(s) weighing the evidence only queued")
    wait_for(lambda: Run.objects.filter(config__mode="evidence", status="succeeded").count() == 30, 120,
             "the 30 evidence-only runs")
    page.goto("/?per_page=25")
    page.locator("input.row-check").first.check()  # one ticked: the view is not offered, the estimate is the kind's pace
    assert page.locator("#select-matching").is_hidden()
    page.select_option("#bulk-kind", "evidence")
    assert page.inner_text("#run-estimate").startswith("running them: about ")
