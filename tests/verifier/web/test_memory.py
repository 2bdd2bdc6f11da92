"""The memory bank pages: list, text and similarity search, an entry with the runs it guided, retiring and
restoring, and promoting a run with an edited trajectory (embedded at once, retrieved by the next run)."""

from __future__ import annotations

import pytest
from django.template.defaultfilters import floatformat
from django.urls import reverse
from django.utils import timezone

from tests.verifier.web.run_pages import make_finished_run, make_live_run, make_world
from tests.verifier.web.workbench import client_for, fast_password_hashing, signed_in  # noqa: F401  (autouse fixture)
from verifier.memory import bank
from verifier.models import AuditEvent, KnowledgeGraph, MemoryEntry, Review, RunMemory
from verifier.models.memory import UNREVIEWED
from verifier.web import forms
from verifier.web import memory as memory_pages

pytestmark = pytest.mark.django_db

ENTRIES = [
    ("Douglas Adams country of citizenship United Kingdom", "country of citizenship",
     "Thought: check where he was born.\nAction: KG_Neighbor(Douglas Adams, P27)\nFinal Answer: [Correct]", "correct"),
    ("Paris capital of Germany", "capital of",
     "Thought: Paris is in France.\nAction: Wiki_Evidence(Paris)\nFinal Answer: [Incorrect]", "incorrect"),
    ("Marie Curie educated at University of Paris", "educated at",
     "Thought: look for her studies at the Sorbonne.\nFinal Answer: [Correct]", "correct"),
]


@pytest.fixture
def entries() -> list[MemoryEntry]:
    return [bank.add_entry(triple_text=text, relation_label=relation, trajectory=trajectory, verdict=verdict)
            for text, relation, trajectory, verdict in ENTRIES]


def listed(response) -> list[int]:
    assert response.status_code == 200
    return [entry.pk for entry in response.context["page"].object_list]


# ---- list and search --------------------------------------------------------------------------------

def test_text_search_finds_words_in_the_triple_or_the_trajectory(make_user, entries):
    client = client_for(make_user, "viewer")
    assert listed(client.get(reverse("memory-list"), {"q": "paris"})) == [entries[2].pk, entries[1].pk]
    assert listed(client.get(reverse("memory-list"), {"q": "sorbonne"})) == [entries[2].pk]
    assert listed(client.get(reverse("memory-list"), {"q": "Douglas Adams nationality"})) == []


def test_the_page_and_the_api_list_the_same_entries_for_the_same_search(make_user, entries):
    """One selector answers both: text in the lesson or provenance counts, and the relation and KG filters work
    in the API as on the page."""
    kg = KnowledgeGraph.objects.create(name="engines", version=1)
    bank.add_entry(triple_text="Ada Lovelace field of work mathematics", relation_label="field of work", trajectory="x",
                   verdict="correct", lesson="Her notes on the Analytical Engine", provenance="imported from sorbonne.json", kg=kg)
    client = client_for(make_user, "viewer")
    page = client.get(reverse("memory-list")).content.decode()
    assert '<option value="engines">engines</option>' in page and "<span class=\"muted\">· engines</span>" in page
    for params in ({"q": "sorbonne"}, {"q": "analytical engine"}, {"relation": "educated at"}, {"verdict": "incorrect"},
                   {"kg": "engines"},
                   {"q": "Douglas Adams nationality", "similar": True}):
        page_params = {**params, "mode": "similar"} if params.pop("similar", False) else params
        api_params = {"similar": params["q"]} if page_params.get("mode") == "similar" else params
        api = client.get("/api/memory/", api_params).json()["results"]
        assert [e["id"] for e in api] == listed(client.get(reverse("memory-list"), page_params)) != [], params


def test_similarity_search_ranks_by_meaning_as_a_run_retrieves(make_user, entries):
    response = client_for(make_user, "viewer").get(reverse("memory-list"), {"q": "Douglas Adams nationality", "mode": "similar"})
    ranked = response.context["page"].object_list
    assert ranked[0].pk == entries[0].pk and len(ranked) == 3
    assert ranked[0].similarity > ranked[1].similarity >= ranked[2].similarity
    assert [m.id for m in bank.retrieve("Douglas Adams nationality", k=3)] == [e.pk for e in ranked]
    assert f'<td class="num similarity">{floatformat(ranked[0].similarity, 3)}</td>' in response.content.decode()


def test_list_filters_by_status_verdict_and_relation(make_user, entries):
    client = client_for(make_user, "viewer")
    entries[1].status = MemoryEntry.Status.RETIRED
    entries[1].save()
    assert set(listed(client.get(reverse("memory-list")))) == {entries[0].pk, entries[2].pk}  # active by default
    assert listed(client.get(reverse("memory-list"), {"status": "retired"})) == [entries[1].pk]
    assert len(listed(client.get(reverse("memory-list"), {"status": "all"}))) == 3
    assert listed(client.get(reverse("memory-list"), {"verdict": "correct", "relation": "educated at"})) == [entries[2].pk]


def test_entry_page_lists_the_runs_that_used_it_with_links(make_user):
    world = make_world()
    run = make_finished_run(world)
    use = RunMemory.objects.get(run=run)
    page = client_for(make_user, "viewer").get(reverse("memory-detail", args=[use.entry_id])).content.decode()
    uses = page.split('id="uses-table"')[1].split("</table>")[0]
    assert f'href="/runs/{run.pk}/">run {run.pk}</a>' in uses and "0.873" in uses
    assert "Douglas Adams · country of citizenship · United Kingdom" in uses
    assert 'id="status-form"' not in page  # a viewer sees no retire button


# ---- retire and restore -----------------------------------------------------------------------------

def test_retiring_hides_an_entry_from_retrieval_and_restoring_brings_it_back(make_user, entries):
    reviewer = make_user("reviewer")
    client = signed_in(reviewer)
    target = entries[0]
    assert bank.retrieve(target.triple_text, k=1)[0].id == target.pk
    response = client.post(reverse("memory-status", args=[target.pk]), {"status": "retired"}, follow=True)
    assert "later runs no longer retrieve it" in response.content.decode()
    assert target.pk not in [m.id for m in bank.retrieve(target.triple_text, k=3)]
    client.post(reverse("memory-status", args=[target.pk]), {"status": "active"})
    assert bank.retrieve(target.triple_text, k=1)[0].id == target.pk
    events = AuditEvent.objects.filter(object_id=str(target.pk), actor=reviewer).order_by("id")
    assert [(e.action, e.before, e.after) for e in events] == [
        ("memory.retire", {"status": "active"}, {"status": "retired"}),
        ("memory.restore", {"status": "retired"}, {"status": "active"})]


def test_an_unknown_status_is_refused(make_user, entries):
    response = client_for(make_user, "reviewer").post(reverse("memory-status", args=[entries[0].pk]), {"status": "deleted"})
    assert response.status_code == 400
    assert MemoryEntry.objects.get(pk=entries[0].pk).status == MemoryEntry.Status.ACTIVE


# ---- review -----------------------------------------------------------------------------------------

@pytest.fixture
def bootstrapped() -> MemoryEntry:
    return bank.add_entry(triple_text="Kinky Friedman educated at University of Göttingen", relation_label="educated at",
                          trajectory="Final Answer: [Incorrect] …", verdict="incorrect",
                          lesson="Decided by the weighed evidence, which gave the claim a probability of 0.01 of being true.",
                          provenance=f"bootstrapped from run 7 of memory-bootstrap-codex-s-n100-s0: a codex-s training triple "
                                     f"corrupted (type-constrained), verdict matched the label; {UNREVIEWED}")


def test_a_reviewer_keeps_a_bootstrapped_entry_with_a_reworded_lesson_and_it_no_longer_awaits_review(make_user, entries,
                                                                                                    bootstrapped):
    client = client_for(make_user, "viewer")
    assert listed(client.get(reverse("memory-list"), {"review": "awaiting"})) == [bootstrapped.pk]
    page = client.get(reverse("memory-detail", args=[bootstrapped.pk])).content.decode()
    assert "Awaits review" in page and "gave the claim a probability of 0.01" in page
    assert 'id="review-form"' not in page  # a viewer reads the lesson but cannot review it
    reviewer = make_user("reviewer", "rosa")
    lesson = "He studied in Texas; nothing ties him to Göttingen,\n and the embedding ranks it last."
    response = signed_in(reviewer).post(reverse("memory-review", args=[bootstrapped.pk]), {"lesson": lesson}, follow=True)
    assert f"Memory {bootstrapped.pk} reviewed" in response.content.decode()
    entry = MemoryEntry.objects.get(pk=bootstrapped.pk)
    assert entry.lesson == "He studied in Texas; nothing ties him to Göttingen, and the embedding ranks it last."
    assert not entry.awaits_review and entry.provenance.endswith("verdict matched the label; reviewed by rosa on "
                                                                 f"{timezone.localdate():%Y-%m-%d}")
    assert listed(client.get(reverse("memory-list"), {"review": "awaiting"})) == []
    assert bootstrapped.pk in listed(client.get(reverse("memory-list"), {"review": "done"}))
    event = AuditEvent.objects.get(action="memory.review", object_id=str(entry.pk))
    assert event.actor == reviewer and event.before["lesson"].startswith("Decided by") and event.after["lesson"] == entry.lesson
    # What the next run's plan is shown is the reworded lesson.
    assert bank.for_claim("Kinky Friedman educated at University of Texas", 1, "educated at")[0].lesson == entry.lesson


def test_retiring_a_bootstrapped_entry_with_a_reason_records_it_as_the_review(make_user, bootstrapped):
    client = signed_in(make_user("reviewer", "rosa"))
    client.post(reverse("memory-status", args=[bootstrapped.pk]), {"status": "retired", "reason": " a true fact  the KG lacks "})
    entry = MemoryEntry.objects.get(pk=bootstrapped.pk)
    assert entry.status == MemoryEntry.Status.RETIRED and not entry.awaits_review
    assert entry.provenance.endswith(f"reviewed and retired by rosa on {timezone.localdate():%Y-%m-%d}: a true fact the KG lacks")
    event = AuditEvent.objects.get(action="memory.retire", object_id=str(entry.pk))
    assert event.after == {"status": "retired", "reason": "a true fact the KG lacks", "provenance": entry.provenance}
    assert event.before == {"status": "active", "provenance": bootstrapped.provenance}


def _awaiting(text: str, lesson: str = "Decided by the weighed evidence.") -> MemoryEntry:
    return bank.add_entry(triple_text=text, relation_label="educated at", trajectory="Final Answer: [Correct] …",
                          verdict="correct", lesson=lesson, provenance=f"bootstrapped from run 9 of x; {UNREVIEWED}")


def test_a_reviewer_keeps_the_ticked_entries_each_as_its_own_review_and_is_told_which_were_left(make_user, entries):
    waiting = [_awaiting("Ada Lovelace educated at home"), _awaiting("Alan Turing educated at King's College")]
    no_lesson = _awaiting("Grace Hopper educated at Yale", lesson="")
    long_lesson = _awaiting("Kurt Gödel educated at University of Vienna", lesson="word " * 100)  # from an old export
    client = signed_in(make_user("reviewer", "rosa"))
    listing = client.get(reverse("memory-list"), {"review": "awaiting"}).content.decode()
    assert 'id="memory-bulk"' in listing and 'id="select-all"' in listing and "kgv/selection.js" in listing
    assert '<div class="lesson-preview" title="Decided by the weighed evidence.">' in listing  # what a keep keeps
    ticked = [*waiting, no_lesson, long_lesson, entries[0]]
    page = client.post(reverse("memory-bulk"), {"action": "keep", "entries": [e.pk for e in ticked],
                                                "return_query": "review=awaiting"}, follow=True)
    assert page.redirect_chain[-1][0] == f"{reverse('memory-list')}?review=awaiting"
    text = page.content.decode()
    assert f"2 entries kept with their lessons, each recorded as your review: {waiting[0].pk}, {waiting[1].pk}." in text
    assert f"{no_lesson.pk} (no lesson yet: open it and write one)" in text and f"{entries[0].pk} (reviewed already)" in text
    assert f"{long_lesson.pk} (the lesson has 499 characters; a small model&#x27;s prompt shows at most 400: open it" in text
    for entry in waiting:
        entry.refresh_from_db()
        assert not entry.awaits_review and f"reviewed by rosa on {timezone.localdate():%Y-%m-%d}" in entry.provenance
    assert AuditEvent.objects.filter(action="memory.review").count() == 2
    for entry in (no_lesson, long_lesson):
        entry.refresh_from_db()
        assert entry.awaits_review


def test_a_reviewer_retires_the_ticked_entries_with_one_reason_and_a_viewer_cannot(make_user, entries):
    waiting = _awaiting("Ada Lovelace educated at home")
    ticked = {"action": "retire", "entries": [waiting.pk, entries[1].pk], "reason": "true facts the KG lacks"}
    assert client_for(make_user, "viewer").post(reverse("memory-bulk"), ticked).status_code == 403
    assert 'id="memory-bulk"' not in client_for(make_user, "viewer").get(reverse("memory-list")).content.decode()
    client = signed_in(make_user("reviewer", "rosa"))
    client.post(reverse("memory-bulk"), ticked)
    assert set(MemoryEntry.objects.filter(status="retired").values_list("pk", flat=True)) == {waiting.pk, entries[1].pk}
    waiting.refresh_from_db()
    assert waiting.provenance.endswith("retired by rosa on " f"{timezone.localdate():%Y-%m-%d}: true facts the KG lacks")
    text = client.post(reverse("memory-bulk"), {**ticked, "reason": "x " * 200}, follow=True).content.decode()
    assert "Nothing changed: the reason has 399 characters" in text
    assert "Tick at least one entry first." in client.post(reverse("memory-bulk"), {"action": "keep"}, follow=True).content.decode()
    assert "Select a valid choice. burn is not one of the available choices." in client.post(
        reverse("memory-bulk"), {"action": "burn", "entries": [entries[0].pk]}, follow=True).content.decode()
    for bad, said in (("99999999999999999999", "no longer exists"), ("x", "x is not a memory id")):
        page = client.post(reverse("memory-bulk"), {"action": "keep", "entries": [entries[0].pk, bad]}, follow=True)
        assert page.status_code == 200 and said in page.content.decode()
    assert MemoryEntry.objects.get(pk=entries[0].pk).status == "active"


@pytest.mark.slow
def test_a_reviewer_keeps_every_entry_of_a_view_longer_than_a_page(make_user, entries, monkeypatch):
    monkeypatch.setattr(memory_pages, "PAGE_SIZE", 2)
    waiting = [_awaiting(f"Person {i} educated at University {i}") for i in range(3)]
    client = signed_in(make_user("reviewer", "rosa"))
    listing = client.get(reverse("memory-list"), {"review": "awaiting"}).content.decode()
    assert 'id="select-matching" hidden data-count="3"' in listing
    similar = client.get(reverse("memory-list"), {"review": "awaiting", "mode": "similar", "q": "Person"}).content.decode()
    assert 'id="select-matching"' not in similar  # a similarity search ranks the whole bank: no "every row" to take
    refused = client.post(reverse("memory-bulk"), {"action": "keep", "matching": "1",
                                                   "return_query": "mode=similar&q=Person"}, follow=True).content.decode()
    assert "A similarity search ranks the whole bank: tick the entries to act on instead." in refused
    page = client.post(reverse("memory-bulk"), {"action": "keep", "matching": "1", "return_query": "review=awaiting"},
                       follow=True).content.decode()
    assert "3 entries kept with their lessons" in page
    assert not any(MemoryEntry.objects.get(pk=e.pk).awaits_review for e in waiting)
    assert all(MemoryEntry.objects.get(pk=e.pk).provenance == e.provenance for e in entries)  # outside the view


def test_a_bulk_review_takes_at_most_the_bulk_limit(make_user, entries, monkeypatch):
    monkeypatch.setattr(forms, "MAX_BULK", 1)
    client = signed_in(make_user("reviewer", "rosa"))
    page = client.post(reverse("memory-bulk"), {"action": "retire", "entries": [entries[0].pk, entries[1].pk], "reason": "why"},
                       follow=True).content.decode()
    assert "One action takes at most 1 entries; 2 were ticked." in page
    assert not MemoryEntry.objects.filter(status="retired").exists()


def test_a_reason_longer_than_is_kept_leaves_the_entry_as_it_was_and_says_why(make_user, bootstrapped):
    client = signed_in(make_user("reviewer", "rosa"))
    page = client.post(reverse("memory-status", args=[bootstrapped.pk]), {"status": "retired", "reason": "why " * 100},
                       follow=True).content.decode()
    assert "unchanged: the reason has 399 characters; at most 300 are kept" in page
    assert 'maxlength="300"' in page
    entry = MemoryEntry.objects.get(pk=bootstrapped.pk)
    assert (entry.status, entry.provenance) == (MemoryEntry.Status.ACTIVE, bootstrapped.provenance)
    assert not AuditEvent.objects.filter(action="memory.retire", object_id=str(entry.pk)).exists()


def test_a_lesson_longer_than_a_prompt_shows_is_refused_and_the_entry_keeps_its_own(make_user, bootstrapped):
    client = client_for(make_user, "reviewer")
    response = client.post(reverse("memory-review", args=[bootstrapped.pk]), {"lesson": "word " * 100})
    assert response.status_code == 400
    assert "prompt shows at most 400" in response.content.decode()
    assert client.post(reverse("memory-review", args=[bootstrapped.pk]), {"lesson": "  "}).status_code == 400
    entry = MemoryEntry.objects.get(pk=bootstrapped.pk)
    assert entry.awaits_review and entry.lesson == bootstrapped.lesson
    assert client_for(make_user, "curator").post(reverse("memory-review", args=[bootstrapped.pk]),
                                                 {"lesson": "x"}).status_code == 403


# ---- promotion --------------------------------------------------------------------------------------

def test_promote_page_offers_the_run_trajectory_for_editing(make_user):
    run = make_finished_run(make_world())
    response = client_for(make_user, "reviewer").get(reverse("run-promote", args=[run.pk]))
    assert response.status_code == 200
    form = response.context["form"]
    assert form["trajectory"].value() == bank.trajectory_of(run)
    assert form["triple_text"].value() == "Douglas Adams country of citizenship United Kingdom"
    page = response.content.decode()
    assert "Thought: I should look at Douglas Adams&#x27;s facts." in page and "<textarea" in page
    assert "Alan Turing country of citizenship United Kingdom" in page  # the closest entry already in the bank


def test_promoting_with_an_edited_trajectory_makes_an_active_entry_the_next_run_retrieves_first(make_user):
    run = make_finished_run(make_world())
    reviewer = make_user("reviewer")
    Review.objects.create(run=run, reviewer=reviewer, decision="accept", verdict="correct")
    client = signed_in(reviewer)
    edited = "Thought: Cambridge is in England.\nAction: KG_Path(Douglas Adams, United Kingdom)\nFinal Answer: [Correct]"
    response = client.post(reverse("run-promote", args=[run.pk]), {
        "triple_text": "Douglas Adams country of citizenship United Kingdom", "trajectory": edited.replace("\n", "\r\n")})
    entry = MemoryEntry.objects.get(source_run=run)
    assert response.status_code == 302 and response["Location"] == reverse("memory-detail", args=[entry.pk])
    assert entry.status == MemoryEntry.Status.ACTIVE and entry.trajectory == edited and entry.verdict == "correct"
    assert entry.promoted_by == reviewer and entry.relation_label == "country of citizenship"
    first = bank.retrieve("Douglas Adams country of citizenship United Kingdom", k=3)[0]
    assert first.id == entry.pk and first.trajectory == edited
    audit = AuditEvent.objects.get(action="memory.promote", object_id=str(entry.pk))
    assert audit.actor == reviewer and audit.after == {"run": run.pk, "verdict": "correct", "edited": True}
    assert f"Run {run.pk} promoted to memory {entry.pk}" in client.get(response["Location"]).content.decode()


def test_promoting_the_unchanged_trajectory_records_it_as_not_edited_and_takes_the_reviewed_verdict(make_user):
    run = make_finished_run(make_world())
    reviewer = make_user("reviewer")
    Review.objects.create(run=run, reviewer=reviewer, decision="override", verdict="incorrect", reason="wrong country")
    client = signed_in(reviewer)
    client.post(reverse("run-promote", args=[run.pk]), {"triple_text": "Douglas Adams citizen of the UK",
                                                         "trajectory": bank.trajectory_of(run)})
    entry = MemoryEntry.objects.get(source_run=run)
    assert entry.verdict == "incorrect" and entry.triple_text == "Douglas Adams citizen of the UK"
    assert entry.trajectory == bank.trajectory_of(run)
    assert AuditEvent.objects.get(action="memory.promote").after["edited"] is False
    again = client.get(reverse("run-promote", args=[run.pk])).content.decode()
    assert 'id="already-promoted"' in again and f"memory {entry.pk}</a>" in again


def test_a_run_without_a_verdict_cannot_be_promoted_and_the_page_says_why(make_user):
    run = make_live_run(make_world())
    response = client_for(make_user, "reviewer").post(reverse("run-promote", args=[run.pk]), {
        "triple_text": "Douglas Adams place of birth Cambridge", "trajectory": "Thought: still running"})
    assert response.status_code == 400
    assert "only a finished run with a verdict can be promoted" in response.content.decode()
    assert not MemoryEntry.objects.filter(source_run=run).exists()


def test_an_emptied_trajectory_is_refused(make_user):
    run = make_finished_run(make_world())
    response = client_for(make_user, "reviewer").post(reverse("run-promote", args=[run.pk]), {
        "triple_text": "Douglas Adams country of citizenship United Kingdom", "trajectory": "   "})
    assert response.status_code == 400 and not MemoryEntry.objects.filter(source_run=run).exists()
