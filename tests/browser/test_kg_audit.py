"""A KG of one's own in a real browser, from its file to reviewed verdicts: an admin onboards a KG from an uploaded
TSV file and follows its stages to the summary; a curator audits it, watches the audit workers' progress to the end,
reads a suspect's reasons, queues the top suspects and starts the evidence investigation of one (the KG's own weighing,
no language model); a reviewer accepts its verdict. The Celery worker of tests/conftest.py runs the onboarding (its
structural model's five networks train within the default budget: minutes), the audit's chunks and the run.

One test walks the whole path: a run on a KG waits for the KG's first structural model, which only the onboarding
trains here."""

from __future__ import annotations

import re
import time

import pytest

from tests.browser.conftest import sign_in
from tests.browser.test_workbench import shoot
from tests.users import PASSWORD
from tests.verifier.structure.test_training import generated_kg
from tests.workers import wait_for
from verifier.models import KGAudit, Onboarding, Review, Run, Suspect, VerificationTask

pytestmark = pytest.mark.django_db(transaction=True)


def towns_tsv(path) -> None:
    """The generated towns KG (tests/verifier/structure/test_training.py) written as a TSV file."""
    kg, triples = generated_kg("towns-source")
    path.write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in triples), encoding="utf-8")
    kg.delete()


def _onboard(page, kg_file, big_file) -> Onboarding:
    """The admin's part: a big file under a name that cannot name a KG, uploaded (slowed, so that its progress shows) and
    refused with nothing kept; then the KG's file, followed stage by stage to the summary."""
    cdp = page.context.new_cdp_session(page)
    cdp.send("Network.enable")
    cdp.send("Network.emulateNetworkConditions", {"offline": False, "latency": 0, "downloadThroughput": -1,
                                                  "uploadThroughput": 500_000})
    page.goto("/kgs/new/")
    page.fill("#onboard-form input[name=name]", "my towns")
    page.set_input_files("#onboard-form input[name=file]", str(big_file))
    page.click("#onboard-button")
    page.wait_for_selector("#upload-status:not([hidden])")
    seen = wait_for(lambda: 0 < float(page.get_attribute("#upload-progress", "value") or 0) < 100
                    and page.inner_text("#upload-text"), 20, "the upload's progress")
    assert re.fullmatch(r"Uploading: \d+% of \d+ KB", seen), seen
    page.wait_for_selector("#onboard-messages .messages li.error")
    assert "cannot name a KG" in page.inner_text("#onboard-messages") and page.is_hidden("#upload-status")
    assert not Onboarding.objects.exists()
    cdp.send("Network.emulateNetworkConditions", {"offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1})

    page.fill("#onboard-form input[name=name]", "towns")
    page.set_input_files("#onboard-form input[name=file]", str(kg_file))
    page.click("#onboard-button")
    page.wait_for_url(re.compile(r"/kgs/onboardings/\d+/$"), timeout=30_000)

    stages: list[str] = []
    started = time.monotonic()
    while not page.locator("#onboarding-summary").count():
        if page.locator("#onboarding-error").count():
            pytest.fail(page.inner_text("#onboarding-error"))
        # read without waiting: the stage line is gone as soon as the summary replaces it
        text = next(iter(page.locator("#onboarding-stage").all_inner_texts()), "")
        if text and (not stages or stages[-1] != text):
            stages.append(text)
        assert time.monotonic() - started < 600, f"the onboarding did not finish in 10 minutes; stages seen: {stages}"
        time.sleep(0.5)
    print(f"\nonboarding the towns KG from the page (5 networks, default budget) took {time.monotonic() - started:.0f} s")
    assert any(text.startswith("training") for text in stages) and len(stages) >= 3, stages  # followed without a reload
    summary = page.inner_text("#onboarding-summary")
    assert "towns is ready: load" in summary and "Structural model: 5 networks" in summary
    onboarding = Onboarding.objects.get(name="towns")
    assert onboarding.status == Onboarding.Status.FINISHED and onboarding.kg.name == "towns"
    assert page.get_attribute("#onboarding-queue", "href") == f"/?kg={onboarding.kg_id}"
    shoot(page, "onboarding")
    page.click("#onboarding-audit")
    page.wait_for_selector("#run-audit-form")
    assert page.locator("#run-audit-form select[name=kg]").input_value() == str(onboarding.kg_id)
    return onboarding


def test_a_kg_goes_from_an_uploaded_file_to_audited_suspects_and_a_reviewed_verdict(browser_context, make_user, tmp_path):
    make_user("admin", username="ada")
    make_user("curator", username="cora")
    make_user("reviewer", username="rita")
    kg_file, big_file = tmp_path / "towns.tsv", tmp_path / "big.tsv"
    towns_tsv(kg_file)
    big_file.write_text(kg_file.read_text(encoding="utf-8") * 400, encoding="utf-8")  # 2 MB
    admin = sign_in(browser_context, "ada", PASSWORD)
    kg = _onboard(admin, kg_file, big_file).kg
    admin.close()  # a page left open keeps polling, signed out, while the next user signs in

    browser_context.clear_cookies()
    page = sign_in(browser_context, "cora", PASSWORD)
    page.goto("/")
    page.click("nav.primary >> text=KG audits")
    page.select_option("#run-audit-form select[name=kg]", str(kg.pk))
    page.click("#run-audit-button")
    page.wait_for_url(re.compile(r"/kg-audits/\d+/$"))
    page.evaluate("window.__first = true")
    assert page.locator("#kg-audit-live").count() == 1  # queued: the live part, which follows the workers
    page.wait_for_selector("#kg-audit-meaning", timeout=120_000)  # loaded again by itself once finished
    assert page.evaluate("window.__first === undefined")
    audit = KGAudit.objects.get(kg=kg)
    assert audit.status == KGAudit.Status.FINISHED and audit.scored == audit.triples and audit.structural_model_id
    assert page.inner_text("#kg-audit-status") == "Finished"
    assert f"{audit.metrics['auc']['all']:.3f}" in page.inner_text("#kg-audit-auc")
    assert page.locator("#kg-audit-distribution rect.histogram-bar").count() == 20
    shoot(page, "kg-audit")

    page.locator("#suspects-table tbody tr[data-rank='1'] a.suspect-link").click()
    page.wait_for_selector("#suspect-reasons")
    top = Suspect.objects.get(audit=audit, rank=1)
    shown = page.locator("#suspect-reasons li").all_inner_texts()
    assert shown == [reason["text"] for reason in top.reasons] or (not top.reasons and "No single statistic" in
                                                                     page.inner_text("#suspect-reasons"))
    assert "The network that never learnt it" in page.inner_text("#suspect-details")
    assert "Not queued yet" in page.inner_text("#suspect-task")

    page.go_back()
    page.fill("#queue-suspects-form input[name=top]", "3")
    page.click("#queue-suspects-button")
    page.wait_for_url(re.compile(rf"/\?kg_audit={audit.pk}$"))
    rows = page.locator("#queue-table tbody tr[data-task-id]")
    assert rows.count() == 3 and "3 suspect(s) of KG audit" in page.inner_text(".messages")
    queued = {int(pk) for pk in rows.evaluate_all("rs => rs.map(r => r.dataset.taskId)")}
    assert queued == set(Suspect.objects.filter(audit=audit, rank__lte=3).values_list("task_id", flat=True))

    top.refresh_from_db()
    task = top.task
    page.locator(f"#queue-table tbody tr[data-task-id='{task.pk}'] td.triple a").first.click()
    page.select_option("#start-kind", "evidence")  # weighed by the KG's own calibration: no language model
    page.click("#start-button")
    page.wait_for_selector("#run-page")
    run = wait_for(lambda: Run.objects.filter(task=task, status__in=["succeeded", "failed"]).first(), 60, "the evidence run")
    assert run.status == Run.Status.SUCCEEDED and run.verdict, run.error
    assert sum(step.prompt_tokens for step in run.steps.all()) == 0

    page.close()
    browser_context.clear_cookies()
    reviewer = sign_in(browser_context, "rita", PASSWORD)
    reviewer.goto(f"/kg-audits/{audit.pk}/suspects/1/")
    reviewer.click("#suspect-run-link")
    reviewer.wait_for_selector("#review-form")
    if reviewer.locator("#review-advance").count() and reviewer.is_checked("#review-advance"):
        reviewer.uncheck("#review-advance")
    reviewer.click("#review-accept")
    review = wait_for(lambda: Review.objects.filter(run=run).first(), 15, "the reviewer's decision")
    assert review.decision == "accept" and review.verdict == run.verdict
    assert VerificationTask.objects.get(pk=task.pk).status == VerificationTask.Status.REVIEWED
