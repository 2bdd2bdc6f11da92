"""The run page (live view, evidence viewer, review), the task page, cancel, and the subgraph JSON."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from tests.verifier.web.run_pages import make_finished_run, make_live_run, make_world
from verifier import confidence
from verifier.models import Review, Run, VerificationTask
from verifier.web.run_evidence import SubgraphBuilder

pytestmark = pytest.mark.django_db

ROLES = [None, "viewer", "curator", "reviewer"]  # None: signed in without a role


@pytest.fixture
def world():
    return make_world()


@pytest.fixture
def finished(world):
    return make_finished_run(world)


def client_for(make_user, role) -> Client:
    client = Client()
    if role != "anonymous":
        client.force_login(make_user(role))
    return client


def is_login_redirect(response) -> bool:
    return response.status_code == 302 and response["Location"].startswith(reverse("login"))


# ---- who may do what -------------------------------------------------------------------------------

def _endpoints(world, finished):
    """(name, method, url, data, lowest role allowed) for every endpoint of the run and task pages."""
    live = make_live_run(world)
    fresh_task = world.task("Q145", "P17", "Q142")
    return [
        ("run page", "get", reverse("run-detail", args=[finished.pk]), {}, "viewer"),
        ("subgraph", "get", reverse("run-graph", args=[finished.pk]), {}, "viewer"),
        ("sections", "get", reverse("run-sections", args=[finished.pk]), {}, "viewer"),
        ("state", "get", reverse("run-state", args=[live.pk]), {}, "viewer"),
        ("compare", "get", reverse("run-compare", args=[finished.pk, make_finished_run(world, finished.task).pk]), {}, "viewer"),
        ("task page", "get", reverse("task-detail", args=[fresh_task.pk]), {}, "viewer"),
        ("start run", "post", reverse("task-detail", args=[fresh_task.pk]), {}, "curator"),
        ("cancel", "post", reverse("run-cancel", args=[live.pk]), {}, "curator"),
        ("comment", "post", reverse("run-review", args=[finished.pk]), {"decision": "comment", "reason": "looks odd"}, "curator"),
        ("accept", "post", reverse("run-review", args=[finished.pk]), {"decision": "accept"}, "reviewer"),
        ("override", "post", reverse("run-review", args=[finished.pk]),
         {"decision": "override", "reason": "the KG is wrong", "verdict": "incorrect"}, "reviewer"),
        ("not enough evidence", "post", reverse("run-review", args=[finished.pk]), {"decision": "not_enough_evidence"}, "reviewer"),
    ]


RANK = {None: -1, "viewer": 0, "curator": 1, "reviewer": 2}


@pytest.mark.parametrize("role", ["anonymous", *ROLES])
def test_every_endpoint_admits_exactly_the_roles_it_needs(make_user, world, finished, role):
    client = client_for(make_user, role)
    for name, method, url, data, needed in _endpoints(world, finished):
        reviews_before = Review.objects.count()
        response = getattr(client, method)(url, data)
        if role == "anonymous":
            assert is_login_redirect(response), f"{name}: anonymous got {response.status_code}"
        elif RANK[role] < RANK[needed]:
            assert response.status_code == 403, f"{name}: {role} got {response.status_code}"
            assert Review.objects.count() == reviews_before, f"{name}: a refused {role} still stored a review"
        else:
            assert response.status_code in (200, 302), f"{name}: {role} got {response.status_code}"
            assert not is_login_redirect(response)


def test_unknown_run_and_task_are_404(make_user):
    client = client_for(make_user, "viewer")
    assert client.get(reverse("run-detail", args=[999999])).status_code == 404
    assert client.get(reverse("run-graph", args=[999999])).status_code == 404
    assert client.get(reverse("run-sections", args=[999999])).status_code == 404
    assert client.get(reverse("task-detail", args=[999999])).status_code == 404


# ---- the evidence viewer ---------------------------------------------------------------------------

def test_run_page_shows_timeline_steps_cited_evidence_with_source_and_step_and_memories(make_user, finished):
    page = client_for(make_user, "viewer").get(reverse("run-detail", args=[finished.pk])).content.decode()
    assert 'data-state="finished"' in page
    assert re.findall(r'<li class="step kind-(\w+)" id="step-\d+" data-seq="(\d+)"', page) == [
        ("plan", "1"), ("thought", "2"), ("action", "3"), ("observation", "4"), ("action", "5"), ("observation", "6"),
        ("verdict", "7")]
    assert len(re.findall(r'class="segment kind-\w+" href="#step-\d+" data-seq=', page)) == 7
    assert 'id="verdict" class="verdict verdict-correct" data-verdict="correct"' in page

    rows = dict(re.findall(r'<tr class="evidence-row" id="evidence-(E\d)"(.*?)</tr>', page, re.S))
    assert sorted(rows) == ["E1", "E2", "E3"]  # E4 was retrieved but not cited
    assert "runs-kg (3)" in rows["E1"] and 'href="#step-4"' in rows["E1"] and "KG_Neighbor" in rows["E1"]
    assert 'href="#step-6"' in rows["E2"] and "Path" in rows["E2"]
    assert 'href="https://en.wikipedia.org/wiki/Douglas_Adams"' in rows["E3"] and "Passage" in rows["E3"]
    assert 'id="retrieved-E4"' in page

    memory = re.search(r'<tr class="memory" data-entry="\d+" data-similarity="([\d.]+)">(.*?)</tr>', page, re.S)
    assert memory.group(1) == "0.873" and "Alan Turing country of citizenship United Kingdom" in memory.group(2)
    assert '<span id="prompt-tokens">200</span>' in page and 'data-seconds="42"' in page


def test_live_run_page_is_marked_live_with_the_last_seq_and_a_cancel_button_for_curators(make_user, world):
    run = make_live_run(world)
    url = reverse("run-detail", args=[run.pk])
    page = client_for(make_user, "curator").get(url).content.decode()
    assert 'data-state="live"' in page and 'data-last-seq="1"' in page and f'data-ws-path="/ws/runs/{run.pk}/"' in page
    assert "kgv/dist/graph.js" in page and "kgv/run.js" in page and "kgv/run.css" in page
    assert 'id="cancel-button"' in page and 'id="pause-toggle"' in page
    assert 'id="cancel-button"' not in client_for(make_user, "viewer").get(url).content.decode()


def test_sections_are_the_parts_an_ended_run_settles_as_its_page_renders_them(make_user, finished):
    """run.js swaps them in by id when the run ends: each is the page's own element, and the review form keeps the
    queue the page was opened from."""
    client = client_for(make_user, "reviewer")
    finished.signals = ["forced"]
    finished.save(update_fields=["signals"])
    page = client.get(reverse("run-detail", args=[finished.pk]), {"queue": "status=verified"}).content.decode()
    sections = client.get(reverse("run-sections", args=[finished.pk]), {"queue": "status=verified"}).content.decode()
    ids = re.findall(r'^<(?:div|section|ul) [^>]*?id="([\w-]+)"', sections, re.M)
    assert ids == ["verdict-confidence", "signals", "assessment", "evidence", "review"]
    for element in ("verdict-confidence", "assessment", "evidence"):
        assert _element(sections, element) == _element(page, element)
    assert 'data-signal="forced"' in _element(sections, "signals") and 'data-signal="forced"' in _element(page, "signals")
    assert 'id="review-accept"' in sections and 'name="queue" value="status=verified"' in _element(sections, "review")
    assert "<html" not in sections and "run-page" not in sections  # the parts only, not the page


def _element(html: str, element_id: str) -> str:
    """The element of ``html`` with this id, from its opening tag to the first line closing one like it."""
    match = re.search(rf'<(\w+) [^>]*?id="{element_id}".*?\n?</\1>', html, re.S)
    return match.group(0)


def test_subgraph_json_has_the_query_triple_highlighted_and_the_cited_support_edges(make_user, finished):
    data = client_for(make_user, "viewer").get(reverse("run-graph", args=[finished.pk])).json()
    edges = {(e["source"], e["relation"], e["target"]): e for e in data["edges"]}
    assert edges[("Q42", "P27", "Q145")]["query"] is True
    assert edges[("Q42", "P19", "Q350")]["keys"] == ["E1", "E2"] and edges[("Q42", "P19", "Q350")]["cited"] is True
    assert edges[("Q350", "P17", "Q145")]["keys"] == ["E2"] and edges[("Q350", "P17", "Q145")]["label"] == "country"
    assert ("Q42", "P19", "Q142") not in edges  # E4 is not cited
    nodes = {n["id"]: n for n in data["nodes"]}
    assert nodes["Q42"]["query"] and nodes["Q145"]["query"] and not nodes["Q350"]["query"]
    assert nodes["Q350"]["label"] == "Cambridge" and data["cited_only"] is True


def test_subgraph_of_a_run_that_cites_nothing_yet_shows_everything_retrieved(make_user, finished):
    finished.support_items.update(cited=False)
    data = client_for(make_user, "viewer").get(reverse("run-graph", args=[finished.pk])).json()
    assert ("Q42", "Q142") in {(e["source"], e["target"]) for e in data["edges"]} and data["cited_only"] is False


def test_subgraph_nodes_sharing_a_label_are_told_apart_by_their_ids():
    graph = SubgraphBuilder()
    graph.node("Q90", "Paris", query=True)
    graph.node("Q830149", "Paris")
    graph.node("Q142", "France")
    graph.edge("Q90", "P17", "Q142", "country")
    labels = {node["id"]: node["label"] for node in graph.as_dict()["nodes"]}
    assert labels == {"Q90": "Paris [Q90]", "Q830149": "Paris [Q830149]", "Q142": "France"}


# ---- review ----------------------------------------------------------------------------------------

def _review(client, run, **data):
    return client.post(reverse("run-review", args=[run.pk]), data)


def _state(client, run) -> str:
    page = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    return re.search(r'id="review-state" class="[^"]*" data-state="(\w+)"', page).group(1)


def test_accept_records_the_runs_verdict_and_settles_the_task(make_user, finished):
    client = client_for(make_user, "reviewer")
    assert _state(client, finished) == "unreviewed"
    response = _review(client, finished, decision="accept", queue="status=verified")
    assert response.status_code == 302
    assert response["Location"] == reverse("run-detail", args=[finished.pk]) + "?queue=status%3Dverified"
    review = Review.objects.get(run=finished)
    assert (review.decision, review.verdict) == ("accept", "correct")
    assert VerificationTask.objects.get(pk=finished.task_id).status == "reviewed"
    assert "Accept recorded for run" in client.get(response["Location"]).content.decode()
    assert _state(client, finished) == "accepted"


def test_override_without_a_reason_shows_the_error_and_stores_nothing(make_user, finished):
    client = client_for(make_user, "reviewer")
    response = _review(client, finished, decision="override", reason="  ", verdict="incorrect")
    assert response.status_code == 400
    page = response.content.decode()
    assert 'id="review-error"' in page and "overriding a verdict needs a reason" in page
    assert not Review.objects.exists()
    assert VerificationTask.objects.get(pk=finished.task_id).status == "verified"


def test_override_with_a_reason_flips_the_verdict(make_user, finished):
    client = client_for(make_user, "reviewer")
    _review(client, finished, decision="override", reason="Adams was British, but the KG edge is from a bad source",
            verdict="incorrect")
    review = Review.objects.get(run=finished)
    assert (review.decision, review.verdict) == ("override", "incorrect")
    assert _state(client, finished) == "overridden"
    assert "bad source" in client.get(reverse("run-detail", args=[finished.pk])).content.decode()


def test_not_enough_evidence_and_a_curators_comment(make_user, finished):
    _review(client_for(make_user, "reviewer"), finished, decision="not_enough_evidence")
    curator = client_for(make_user, "curator")
    assert _review(curator, finished, decision="comment", reason="check the 1952 census").status_code == 302
    assert list(Review.objects.order_by("id").values_list("decision", "verdict")) == [
        ("not_enough_evidence", "not_enough_evidence"), ("comment", "")]
    assert _state(curator, finished) == "not_enough_evidence"  # a comment does not change the state


def test_an_empty_comment_is_refused_with_a_message(make_user, finished):
    response = _review(client_for(make_user, "curator"), finished, decision="comment", reason="")
    assert response.status_code == 400 and "a comment needs text" in response.content.decode()
    assert not Review.objects.exists()


def test_reviewers_who_disagree_leave_the_run_split(make_user, finished):
    _review(client_for(make_user, "reviewer"), finished, decision="accept")
    second = client_for(make_user, "reviewer")
    _review(second, finished, decision="override", reason="wrong", verdict="incorrect")
    assert _state(second, finished) == "split"


def test_decisions_on_a_run_without_a_verdict_are_refused(make_user, world):
    run = make_live_run(world)
    response = _review(client_for(make_user, "reviewer"), run, decision="accept")
    assert response.status_code == 400 and "has no verdict to review" in response.content.decode()
    assert not Review.objects.exists()


@pytest.mark.slow
def test_review_form_shows_decisions_to_reviewers_and_only_comments_to_curators(make_user, finished):
    url = reverse("run-detail", args=[finished.pk])
    reviewer = client_for(make_user, "reviewer")
    reviewer_page = reviewer.get(url).content.decode()
    assert all(f'id="{i}"' in reviewer_page for i in ("review-form", "review-accept", "review-override", "review-nee"))
    assert 'id="promote-link"' not in reviewer_page  # promotion follows a review
    _review(reviewer, finished, decision="accept")
    assert 'id="promote-link"' in reviewer.get(url).content.decode()
    curator_page = client_for(make_user, "curator").get(url).content.decode()
    assert 'id="review-form"' in curator_page and 'id="review-comment"' in curator_page
    assert 'id="review-accept"' not in curator_page
    assert 'id="review-form"' not in client_for(make_user, "viewer").get(url).content.decode()


# ---- cancel and start ------------------------------------------------------------------------------

def test_cancel_stops_a_live_run_and_says_so(make_user, world):
    run = make_live_run(world)
    client = client_for(make_user, "curator")
    response = client.post(reverse("run-cancel", args=[run.pk]), follow=True)
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED and run.finished_at is not None
    assert "was cancelled" in response.content.decode() and 'data-state="finished"' in response.content.decode()


def test_cancelling_a_finished_run_changes_nothing_and_says_why(make_user, finished):
    response = client_for(make_user, "curator").post(reverse("run-cancel", args=[finished.pk]), follow=True)
    assert Run.objects.get(pk=finished.pk).status == Run.Status.SUCCEEDED
    assert "had already ended" in response.content.decode()


def test_task_page_redirects_to_the_latest_run(make_user, world, finished):
    newer = Run.objects.create(task=finished.task, status=Run.Status.QUEUED)
    response = client_for(make_user, "viewer").get(reverse("task-detail", args=[finished.task_id]) + "?queue=status%3Dverified")
    assert response["Location"] == reverse("run-detail", args=[newer.pk]) + "?queue=status%3Dverified"


def test_task_without_runs_offers_start_to_curators_and_starting_opens_the_new_run(make_user, world):
    task = world.task("Q145", "P17", "Q142")
    url = reverse("task-detail", args=[task.pk])
    assert 'id="start-button"' not in client_for(make_user, "viewer").get(url).content.decode()
    curator = client_for(make_user, "curator")
    assert 'id="start-button"' in curator.get(url).content.decode()
    response = curator.post(url)
    run = Run.objects.get(task=task)
    assert response["Location"] == reverse("run-detail", args=[run.pk]) and run.status == Run.Status.QUEUED
    assert run.request == {}


def test_a_run_started_from_the_run_page_can_weigh_the_evidence_only(make_user, finished):
    curator = client_for(make_user, "curator")
    page = curator.get(reverse("run-detail", args=[finished.pk])).content.decode()
    assert 'id="rerun-kind"' in page and "Weigh the evidence only (needs a confidence model)</option>" in page
    url = reverse("task-detail", args=[finished.task_id])
    refused = curator.post(url, {"kind": "oracle"}, follow=True)
    assert "No new run: Select a valid choice. oracle is not one of the available choices." in refused.content.decode()
    assert finished.task.runs.count() == 1
    refused = curator.post(url, {"kind": "evidence"}, follow=True).content.decode()
    assert "No new run: the evidence mode decides only through a confidence model, and none is in force" in refused
    assert finished.task.runs.count() == 1
    confidence.seed_shipped_models()
    page = curator.get(reverse("run-detail", args=[finished.pk])).content.decode()
    assert '<option value="evidence">Weigh the evidence only</option>' in page
    curator.post(url, {"kind": "evidence"})
    assert finished.task.runs.order_by("-pk").first().request == {"mode": "evidence"}


# ---- queue navigation ------------------------------------------------------------------------------

def _nav(page: str) -> tuple[str | None, str | None]:
    previous = re.search(r'id="previous-link" href="([^"]+)"', page)
    following = re.search(r'id="next-link" href="([^"]+)"', page)
    return (previous.group(1).replace("&amp;", "&") if previous else None,
            following.group(1).replace("&amp;", "&") if following else None)


def test_previous_and_next_follow_the_queue_newest_first(make_user, world):
    oldest = world.task("Q42", "P27", "Q145")
    middle = make_finished_run(world, world.task("Q42", "P19", "Q350"))
    newest = world.task("Q350", "P17", "Q145")
    page = client_for(make_user, "viewer").get(reverse("run-detail", args=[middle.pk])).content.decode()
    assert _nav(page) == (reverse("task-detail", args=[newest.pk]), reverse("task-detail", args=[oldest.pk]))


def test_navigation_applies_the_queue_pages_filters_and_sort(make_user, world):
    """The queue page's filter function (verifier/queue_filters.py) decides which tasks are in the queue and
    in which order; the run page passes its ``queue`` parameter through unchanged."""
    oldest = world.task("Q42", "P27", "Q145", status="verified")
    world.task("Q142", "P17", "Q145", status="pending")
    middle = make_finished_run(world, world.task("Q42", "P19", "Q350", status="verified"))
    newest = world.task("Q350", "P17", "Q145", status="verified")
    client = client_for(make_user, "viewer")
    queue = "status=verified&sort=id"  # oldest first, pending tasks left out
    page = client.get(reverse("run-detail", args=[middle.pk]), {"queue": queue}).content.decode()
    suffix = "?queue=status%3Dverified%26sort%3Did"
    assert _nav(page) == (reverse("task-detail", args=[oldest.pk]) + suffix, reverse("task-detail", args=[newest.pk]) + suffix)


def test_a_queue_filter_the_queue_page_would_reject_falls_back_to_the_whole_queue(make_user, world):
    oldest = world.task("Q42", "P27", "Q145")
    middle = make_finished_run(world, world.task("Q42", "P19", "Q350"))
    page = client_for(make_user, "viewer").get(reverse("run-detail", args=[middle.pk]), {"queue": "status=bogus"}).content.decode()
    assert _nav(page)[1] == reverse("task-detail", args=[oldest.pk]) + "?queue=status%3Dbogus"


# ---- review that flows: decide, advance, undo ----------------------------------------------------------

def test_a_decision_advances_to_the_next_task_awaiting_review_and_can_be_undone_from_there(make_user, world):
    reviewed = make_finished_run(world)  # the newest task comes first in the queue
    no_run = world.task("Q42", "P19", "Q350")  # next in the queue, but nothing to review: passed over
    older = make_finished_run(world, world.task("Q350", "P17", "Q145"))
    VerificationTask.objects.filter(pk=no_run.pk).update(created_at=reviewed.task.created_at.replace(year=2021))
    VerificationTask.objects.filter(pk=older.task_id).update(created_at=reviewed.task.created_at.replace(year=2020),
                                                            status="verified")
    client = client_for(make_user, "reviewer")
    response = _review(client, reviewed, decision="accept", advance="1")
    assert response["Location"] == reverse("task-detail", args=[older.task_id])
    page = client.get(response["Location"], follow=True).content.decode()
    assert "this is the next task awaiting review" in page and 'id="undo-form"' in page
    review = Review.objects.get(run=reviewed)
    assert f'action="{reverse("review-undo", args=[review.pk])}"' in page
    assert VerificationTask.objects.get(pk=reviewed.task_id).status == "reviewed"

    undone = client.post(reverse("review-undo", args=[review.pk]))
    assert undone["Location"] == reverse("run-detail", args=[reviewed.pk])
    assert not Review.objects.filter(run=reviewed).exists()
    assert VerificationTask.objects.get(pk=reviewed.task_id).status == "verified"
    assert "Undid the accept on run" in client.get(undone["Location"]).content.decode()
    assert 'id="undo-form"' not in client.get(undone["Location"]).content.decode()


def test_without_advance_or_a_next_task_the_decision_stays_on_the_run(make_user, world, finished):
    client = client_for(make_user, "reviewer")
    response = _review(client, finished, decision="accept")
    assert response["Location"] == reverse("run-detail", args=[finished.pk])
    other = make_finished_run(world, world.task("Q42", "P19", "Q350", status="verified"))
    response = _review(client, other, decision="accept", advance="1")  # nothing else awaits review: it stays, and says so
    assert response["Location"] == reverse("run-detail", args=[other.pk])
    assert "no other task of this view awaits review" in client.get(response["Location"]).content.decode()


@pytest.mark.slow
def test_only_the_reviewer_undoes_a_decision_and_only_for_a_while(make_user, finished):
    from datetime import timedelta

    from django.utils import timezone

    reviewer = client_for(make_user, "reviewer")
    _review(reviewer, finished, decision="override", reason="wrong edge", verdict="incorrect")
    review = Review.objects.get(run=finished)
    other = client_for(make_user, "reviewer")
    refused = other.post(reverse("review-undo", args=[review.pk]), follow=True).content.decode()
    assert "only the reviewer who recorded a decision can undo it" in refused and Review.objects.filter(pk=review.pk).exists()
    Review.objects.filter(pk=review.pk).update(created_at=timezone.now() - timedelta(hours=1))
    late = reviewer.post(reverse("review-undo", args=[review.pk]), follow=True).content.decode()
    assert "can be undone for 15 minutes" in late and Review.objects.filter(pk=review.pk).exists()


@pytest.mark.slow
def test_a_queued_run_takes_its_place_from_the_workers_line_and_its_wait_from_the_pace_of_recent_runs(make_user, world,
                                                                                                     finished):
    from datetime import timedelta

    from verifier.selectors import place_in_line, queue_wait

    Run.objects.filter(pk=finished.pk).update(finished_at=finished.started_at + timedelta(seconds=40))
    first = Run.objects.create(task=world.task("Q145", "P17", "Q142"), status=Run.Status.QUEUED)
    second = Run.objects.create(task=world.task("Q350", "P17", "Q145"), status=Run.Status.QUEUED)
    # The line is the broker's order, not the order the rows were made in: a run sent again stands behind.
    line = [finished.pk, second.pk, first.pk]  # the finished run's message is still held by its worker: not ahead
    assert place_in_line(second, line).position == 1 and place_in_line(first, line).ahead == (second.pk,)
    assert queue_wait(first, place_in_line(first, line)) == "about 80 s"
    assert place_in_line(first, [second.pk]).position is None  # no message for it (yet): no place to show
    assert place_in_line(second, None).position == 2  # a broker that cannot be read: the order they were made in
    assert place_in_line(finished, line).position is None

    # Its page shows no place it does not have, and says why it has not started.
    client = client_for(make_user, "viewer")
    page = client.get(reverse("run-detail", args=[second.pk])).content.decode()
    assert re.search(r'id="queue-position"[^>]*hidden', page) and "Not in the workers&#x27; queue yet" in page
    state = client.get(reverse("run-state", args=[second.pk])).json()
    assert (state["status"], state["position"], state["position_text"]) == ("queued", None, "")
    assert state["waiting"].startswith("Not in the workers' queue yet")
    assert client.get(reverse("run-state", args=[finished.pk])).json()["waiting"] == ""

    queue = client_for(make_user, "curator").get(reverse("queue")).content.decode()
    assert 'data-agent-seconds="40.0"' in queue and "data-evidence-seconds" not in queue  # the bulk run's estimate
    Run.objects.create(task=world.task("Q350", "P17", "Q142"), status=Run.Status.SUCCEEDED, config={"mode": "evidence"},
                       started_at=finished.started_at, finished_at=finished.started_at + timedelta(seconds=2))
    queue = client_for(make_user, "curator").get(reverse("queue")).content.decode()
    assert 'data-agent-seconds="40.0"' in queue and 'data-evidence-seconds="2.0"' in queue  # each kind its own pace
    weighing = [Run.objects.create(task=world.task("Q42", "P17", tail), status=Run.Status.QUEUED, config={"mode": "evidence"})
                for tail in ("Q145", "Q142")]
    last = Run.objects.create(task=world.task("Q42", "P17", "Q350"), status=Run.Status.QUEUED)
    line = [first.pk, second.pk, *(run.pk for run in weighing), last.pk]
    assert queue_wait(weighing[1], place_in_line(weighing[1], line)) == "about 84 s"
    assert queue_wait(last, place_in_line(last, line)) == "about 2 min"


def test_after_a_review_the_header_labels_the_agents_verdict_and_the_final_one(make_user, finished):
    client = client_for(make_user, "reviewer")
    _review(client, finished, decision="override", reason="the KG edge is from a bad source", verdict="incorrect")
    page = client.get(reverse("run-detail", args=[finished.pk])).content.decode()
    assert re.search(r'<span class="verdict-source">Verdict</span> Correct', page)
    assert re.search(r'id="final-verdict"[^>]*><span class="verdict-source">Final, after review</span> Incorrect', page)


@pytest.mark.slow
def test_reviewer_figures_count_decisions_kept_verdicts_and_agreement(make_user, world, finished):
    from verifier.web.reviewers import reviewer_figures

    rita, sam = make_user("reviewer", "rita"), make_user("reviewer", "sam")
    other = make_finished_run(world, world.task("Q145", "P17", "Q142"))
    Review.objects.create(run=finished, reviewer=rita, decision="accept", verdict="correct")
    Review.objects.create(run=finished, reviewer=sam, decision="override", verdict="incorrect", reason="no")
    Review.objects.create(run=other, reviewer=rita, decision="accept", verdict="correct")
    Review.objects.create(run=other, reviewer=sam, decision="comment", reason="fine")  # a comment is no decision
    figures = {row.username: row for row in reviewer_figures()}
    assert (figures["rita"].decisions, figures["rita"].accepted, figures["rita"].shared, figures["rita"].agreed) == (2, 2, 1, 0)
    assert (figures["sam"].decisions, figures["sam"].overridden, figures["sam"].agreement) == (1, 1, 0.0)
    page = client_for(make_user, "viewer").get(reverse("reviewers")).content.decode()
    assert 'data-reviewer="rita"' in page and "100%" in page


@pytest.mark.slow
def test_the_gold_label_and_its_source_show_only_to_an_admin_on_an_evaluations_triple_or_after_deciding(make_user, world):
    task = world.task(status=VerificationTask.Status.VERIFIED, source="valid_negatives.txt:1383", expected_label=False)
    run = make_finished_run(world, task)
    for role in ("viewer", "curator", "reviewer"):
        page = client_for(make_user, role).get(reverse("run-detail", args=[run.pk])).content.decode()
        assert "gold label" not in page and "valid_negatives" not in page, role
        assert "valid_negatives" not in client_for(make_user, role).get(reverse("queue")).content.decode(), role
    admin = client_for(make_user, "admin").get(reverse("run-detail", args=[run.pk])).content.decode()
    assert "gold label incorrect" in admin and "valid_negatives.txt:1383" in admin

    reviewer = client_for(make_user, "reviewer")
    _review(reviewer, run, decision="comment", reason="looking")  # a comment decides nothing: still hidden
    assert "gold label" not in reviewer.get(reverse("run-detail", args=[run.pk])).content.decode()
    _review(reviewer, run, decision="accept")
    assert "gold label incorrect" in reviewer.get(reverse("run-detail", args=[run.pk])).content.decode()

    VerificationTask.objects.filter(pk=task.pk).update(source="evaluation:codex-kge-400")  # an evaluation's data
    assert "gold label incorrect" in client_for(make_user, "viewer").get(reverse("run-detail", args=[run.pk])).content.decode()
