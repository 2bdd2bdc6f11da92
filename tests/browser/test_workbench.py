"""The curator's day in a real browser: import, run and watch live, review, promote, export.

Runs are executed by the real Celery worker of tests/browser/conftest.py, their steps travel through
Redis to the page's websocket; the model is the scripted investigator (tests/browser/model.py)."""

from __future__ import annotations

import csv
import io
import json
import os
import time
from pathlib import Path

import pytest
import rdflib

from tests.browser.conftest import sign_in
from tests.users import PASSWORD
from tests.workers import wait_for
from verifier.memory import bank
from verifier.models import MemoryEntry, Review, Run, RunMemory, VerificationTask
from verifier.models.memory import UNREVIEWED
from verifier.services import start_run

pytestmark = pytest.mark.django_db(transaction=True)

SCREENSHOTS = Path(os.environ["KGV_SCREENSHOTS"]) if os.environ.get("KGV_SCREENSHOTS") else None


def shoot(page, name: str, *, around: str = "") -> None:
    """Screenshots for the README when KGV_SCREENSHOTS names a folder (``make screenshots``): the whole page,
    or the screen scrolled to the element ``around``."""
    if SCREENSHOTS is not None:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        if around:
            page.locator(around).scroll_into_view_if_needed()
        page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=not around)



def task_of(kg, head: str, relation: str, tail: str) -> VerificationTask:
    return VerificationTask.objects.get_or_create(kg=kg, head=kg.entities.get(external_id=head),
                                                  relation=kg.relations.get(external_id=relation),
                                                  tail=kg.entities.get(external_id=tail))[0]


def finished_run(task, actor) -> Run:
    run = start_run(task=task, actor=actor)
    wait_for(lambda: Run.objects.get(pk=run.pk).status in {"succeeded", "failed"}, what=f"run {run.pk} to finish")
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.error
    return run


def test_a_curator_imports_flagged_triples_starts_a_run_and_watches_it_live(browser_context, world_kg, make_user, tmp_path):
    make_user("curator", username="carla")
    page = sign_in(browser_context, "carla", PASSWORD)

    flagged = tmp_path / "flagged.csv"
    flagged.write_text("head,relation,tail\nDouglas Adams,country of citizenship,United Kingdom\n"
                       "Douglas Adams,educated at,St John's College\n", encoding="utf-8")
    page.goto("/import/")
    page.select_option("select[name=kg]", label=world_kg.name)
    page.set_input_files("input[name=file]", str(flagged))
    page.click("#preview-button")  # the preview first: what would be queued, nothing queued yet
    page.wait_for_selector("#import-preview")
    assert "2 resolved, 2 new" in page.inner_text("#import-preview") and not VerificationTask.objects.exists()
    page.click("#confirm-import button[type=submit]")
    page.wait_for_selector("#queue-table")
    rows = page.locator("#queue-table tbody tr[data-task-id]")
    assert rows.count() == 2
    shoot(page, "queue")

    page.locator("#queue-table tbody tr", has_text="United Kingdom").locator("td.triple a").click()
    page.click("#start-button")
    page.wait_for_selector("#run-page")
    page.evaluate("window.__sameDocument = true")  # gone if the page reloads instead of streaming
    seen = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        count = page.locator("#steps [data-seq]").count()
        if not seen or seen[-1] != count:
            seen.append(count)
        if page.get_attribute("#run-page", "data-state") == "finished" and page.locator("#verdict").count():
            break
        if len(seen) == 4:
            shoot(page, "live-run")
        time.sleep(0.1)
    run = Run.objects.get(task__head__external_id="Q42", task__tail__external_id="Q145")
    assert run.status == Run.Status.SUCCEEDED
    stored = list(run.steps.order_by("seq").values_list("seq", flat=True))
    shown = [int(s) for s in page.locator("#steps [data-seq]").evaluate_all("els => els.map(e => e.dataset.seq)")]
    assert shown == stored  # every step, in order, none twice
    assert len(seen) >= 4, f"steps should arrive one by one, saw counts {seen}"
    assert page.evaluate("window.__sameDocument") is True
    assert "Correct" in page.inner_text("#verdict")
    page.wait_for_selector("#evidence-table .evidence-row")  # swapped in when the run ends, no reload
    page.wait_for_selector("#graph canvas", state="attached")
    shoot(page, "evidence")


def test_a_reviewer_overrides_one_run_promotes_another_and_the_next_run_uses_that_memory(browser_context, world_kg, make_user):
    curator = make_user("curator")
    make_user("reviewer", username="rita")
    overridden = finished_run(task_of(world_kg, "Q42", "P27", "Q145"), curator)
    promoted = finished_run(task_of(world_kg, "Q42", "P19", "Q350"), curator)
    page = sign_in(browser_context, "rita", PASSWORD)

    page.goto(f"/runs/{overridden.pk}/")
    page.click("#review-override")  # no reason yet: refused, nothing stored
    page.wait_for_selector("#review-error")
    assert not Review.objects.filter(run=overridden).exists()
    page.fill("#review-reason", "The retrieved path shows birth in Cambridge, not citizenship.")
    page.uncheck("#review-advance")  # stay on the run to see the decision (advancing: test_review_flow.py)
    page.click("#review-override")
    page.wait_for_selector("#review-state[data-state=overridden]")
    shoot(page, "review", around="#review")
    review = Review.objects.get(run=overridden)
    assert review.decision == "override" and review.verdict == "incorrect" and "Cambridge" in review.reason

    page.goto(f"/runs/{promoted.pk}/")
    page.uncheck("#review-advance")  # stay on the run: it is promoted next
    page.click("#review-accept")
    page.wait_for_selector("#review-state[data-state=accepted]")
    page.click("#promote-link")
    trajectory = page.input_value("#promote-form textarea[name=trajectory]")
    assert "Final Answer" in trajectory
    page.fill("#promote-form textarea[name=trajectory]", trajectory + "\nReviewer note: the birthplace fact is direct evidence.")
    page.click("#promote-form button[type=submit]")
    entry = wait_for(lambda: MemoryEntry.objects.filter(source_run=promoted).first(), 10, "the memory entry")
    assert entry.trajectory.endswith("direct evidence.") and entry.status == "active"

    # The next run, of a similar claim of the same relation, is guided by that memory, and its page says so.
    nxt = start_run(task=task_of(world_kg, "Q42", "P19", "Q90"), actor=curator)
    wait_for(lambda: Run.objects.get(pk=nxt.pk).status == "succeeded", what="the next run")
    used = RunMemory.objects.get(run=nxt, entry=entry)
    page.goto(f"/runs/{nxt.pk}/")
    row = page.locator(f"#memories tr.memory[data-entry='{entry.pk}']")
    assert row.count() == 1 and float(row.get_attribute("data-similarity")) == pytest.approx(used.similarity, abs=1e-3)


def test_a_reviewer_accepts_the_confident_verdicts_of_a_filtered_queue(browser_context, world_kg, make_user):
    make_user("reviewer", username="rhea")
    sure, unsure = task_of(world_kg, "Q42", "P27", "Q145"), task_of(world_kg, "Q42", "P19", "Q90")
    for task, confidence in ((sure, 0.97), (unsure, 0.6)):
        Run.objects.create(task=task, status=Run.Status.SUCCEEDED, verdict="correct", confidence=confidence)
        VerificationTask.objects.filter(pk=task.pk).update(status=VerificationTask.Status.VERIFIED)
    page = sign_in(browser_context, "rhea", PASSWORD)
    page.goto("/?confidence_min=0.9")
    assert page.locator("input.row-check").count() == 1
    page.check("#select-all")
    page.once("dialog", lambda dialog: dialog.dismiss())  # the reviewer thinks again: nothing is sent
    page.click("#bulk-accept")
    page.wait_for_timeout(500)
    assert "confidence_min=0.9" in page.url and not Review.objects.exists()
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#bulk-accept")
    page.wait_for_selector("text=1 verdict(s) accepted.")
    assert [(r.run.task_id, r.decision, r.verdict) for r in Review.objects.all()] == [(sure.pk, "accept", "correct")]
    assert "confidence_min=0.9" in page.url  # back to the queue as the reviewer filtered it


def test_a_reviewer_keeps_a_page_of_memories_awaiting_review_in_one_step(browser_context, make_user):
    make_user("reviewer", username="rhea")
    waiting = [bank.add_entry(triple_text=f"Person {n} educated at University {n}", relation_label="educated at",
                              trajectory="Final Answer: [Correct] …", verdict="correct", lesson="Decided by the weighed evidence.",
                              provenance=f"bootstrapped from run {n}; {UNREVIEWED}") for n in range(3)]
    page = sign_in(browser_context, "rhea", PASSWORD)
    page.goto("/memory/?review=awaiting")
    assert page.is_disabled("#bulk-keep") and page.inner_text("#selected-count") == "None selected"
    page.check("#select-all")
    assert page.inner_text("#selected-count") == "3 selected" and page.is_enabled("#bulk-keep")
    page.once("dialog", lambda dialog: dialog.dismiss())  # asked first, naming the count: nothing is sent
    page.click("#bulk-keep")
    page.wait_for_timeout(500)
    assert all(MemoryEntry.objects.get(pk=entry.pk).awaits_review for entry in waiting)
    asked = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
    page.click("#bulk-keep")
    page.wait_for_selector("text=3 entries kept with their lessons")
    assert "review=awaiting" in page.url and page.locator("input.row-check").count() == 0  # none awaits review now
    assert asked[0].startswith("Keep 3 ticked entr(ies)")
    assert not any(MemoryEntry.objects.get(pk=entry.pk).awaits_review for entry in waiting)


@pytest.mark.parametrize("fmt", ["json", "csv", "ttl", "changes"])
def test_an_export_of_the_selection_downloads_and_parses(browser_context, world_kg, make_user, fmt):
    curator = make_user("curator")
    make_user("viewer", username="vic")
    run = finished_run(task_of(world_kg, "Q42", "P27", "Q145"), curator)
    page = sign_in(browser_context, "vic", PASSWORD)
    page.goto("/")
    page.check(f"input.row-check[value='{run.task_id}']")
    page.select_option("#bulk-fmt", fmt)
    with page.expect_download() as download_info:
        page.click("button[name=action][value=export]")
    body = Path(download_info.value.path()).read_text(encoding="utf-8")
    if fmt == "json":
        data = json.loads(body)
        assert str(run.pk) in json.dumps(data) and "Douglas Adams" in body
    elif fmt == "csv":
        rows = list(csv.DictReader(io.StringIO(body)))
        assert len(rows) >= 1 and any("Douglas Adams" in " ".join(map(str, row.values())) for row in rows)
    elif fmt == "changes":
        (row,) = csv.DictReader(io.StringIO(body), delimiter="\t")
        assert (row["head"], row["change"], row["why"], row["in_kg"]) == ("Douglas Adams", "", "not reviewed", "true")
    else:
        graph = rdflib.Graph().parse(data=body, format="turtle")
        prov = rdflib.Namespace("http://www.w3.org/ns/prov#")
        assert any(graph.triples((None, prov.wasGeneratedBy, None)))
