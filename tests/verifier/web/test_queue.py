"""The queue page (filters, search, sort, pagination, live status), its bulk actions and the audit log
(importing from a file: test_queue_import.py)."""

from __future__ import annotations

import csv
import dataclasses
import io
import re
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

import pytest
from django.urls import reverse

from tests.verifier.web.run_pages import RunWorld, make_world
from tests.verifier.web.workbench import client_for, fast_password_hashing, signed_in  # noqa: F401  (autouse fixture)
from verifier import exports
from verifier.models import AuditEvent, Entity, KnowledgeGraph, Relation, Review, Run, VerificationTask
from verifier.queue_filters import filter_tasks
from verifier.web import forms
from verifier.web.run_evidence import review_state

pytestmark = pytest.mark.django_db

Status = VerificationTask.Status


@dataclass
class Queue:
    world: RunWorld
    me: object  # the curator looking at the queue
    client: object
    pending: VerificationTask
    correct: VerificationTask  # verified, correct at 0.9
    incorrect: VerificationTask  # verified, incorrect at 0.4
    agreed: VerificationTask  # reviewed: the reviewer accepted "correct" (0.8)
    overridden: VerificationTask  # reviewed: the reviewer overrode "correct" (0.6) to incorrect
    running: VerificationTask  # a run in progress, assigned to me


def _finished(task, verdict, confidence) -> Run:
    return Run.objects.create(task=task, status=Run.Status.SUCCEEDED, verdict=verdict, confidence=confidence)


@pytest.fixture
def queue(make_user) -> Queue:
    world = make_world()
    me, reviewer = make_user("curator", "me"), make_user("reviewer", "rita")
    client = signed_in(me)
    pending = world.task("Q42", "P27", "Q145")
    correct = world.task("Q42", "P19", "Q350", status=Status.VERIFIED)
    incorrect = world.task("Q42", "P19", "Q142", status=Status.VERIFIED)
    agreed = world.task("Q350", "P17", "Q145", status=Status.REVIEWED)
    overridden = world.task("Q142", "P17", "Q145", status=Status.REVIEWED)
    running = world.task("Q145", "P17", "Q142", status=Status.RUNNING, assignee=me)
    _finished(correct, "correct", 0.9)
    _finished(incorrect, "incorrect", 0.4)
    Review.objects.create(run=_finished(agreed, "correct", 0.8), reviewer=reviewer, decision="accept", verdict="correct")
    Review.objects.create(run=_finished(overridden, "correct", 0.6), reviewer=reviewer, decision="override",
                          verdict="incorrect", reason="the KG says otherwise")
    Run.objects.create(task=running, status=Run.Status.RUNNING)
    return Queue(world, me, client, pending, correct, incorrect, agreed, overridden, running)


def shown(response) -> list[int]:
    assert response.status_code == 200, response.content.decode()[:2000]
    return [task.pk for task in response.context["page"].object_list]


def ids(*tasks) -> set[int]:
    return {task.pk for task in tasks}


# ---- filters, search, sort -------------------------------------------------------------------------

@pytest.mark.parametrize(("params", "expected"), [
    ({"status": "pending"}, ["pending"]),
    ({"status": "verified"}, ["correct", "incorrect"]),
    ({"verdict": "incorrect"}, ["incorrect"]),
    ({"verdict": "none"}, ["pending", "running"]),
    ({"agreement": "agree"}, ["agreed"]),
    ({"agreement": "disagree"}, ["overridden"]),
    ({"confidence_min": "0.7"}, ["correct", "agreed"]),
    ({"confidence_min": "0.5", "confidence_max": "0.85"}, ["agreed", "overridden"]),
    ({"assignee": "me"}, ["running"]),
    ({"q": "cambridge"}, ["correct", "agreed"]),
    ({"q": "P19"}, ["correct", "incorrect"]),
    ({"status": "reviewed", "agreement": "agree"}, ["agreed"]),
])
def test_filters_and_search_narrow_the_queue_to_the_matching_tasks(queue, params, expected):
    assert set(shown(queue.client.get(reverse("queue"), params))) == ids(*(getattr(queue, name) for name in expected))


def test_relation_filter_keeps_the_tasks_of_that_relation(queue):
    relation = queue.world.relations["P17"]
    assert set(shown(queue.client.get(reverse("queue"), {"relation": relation.pk}))) == ids(
        queue.agreed, queue.overridden, queue.running)


def test_the_home_page_is_the_whole_queue_newest_first(queue):
    response = queue.client.get("/")
    assert shown(response) == [queue.running.pk, queue.overridden.pk, queue.agreed.pk, queue.incorrect.pk,
                               queue.correct.pk, queue.pending.pk]
    assert reverse("home") == reverse("queue") == "/"


@pytest.mark.parametrize(("sort", "expected"), [
    ("-confidence", ["correct", "agreed", "overridden", "incorrect", "running", "pending"]),  # no verdict last
    ("confidence", ["incorrect", "overridden", "agreed", "correct", "pending", "running"]),
    ("created", ["pending", "correct", "incorrect", "agreed", "overridden", "running"]),
])
def test_sorting_orders_rows_by_the_chosen_key(queue, sort, expected):
    assert shown(queue.client.get(reverse("queue"), {"sort": sort})) == [getattr(queue, name).pk for name in expected]


def test_sorting_by_relation_and_status_groups_rows(queue):
    by_relation = queue.client.get(reverse("queue"), {"sort": "relation"}).context["page"].object_list
    labels = [task.relation.label for task in by_relation]
    assert labels == sorted(labels) and labels[0] == "country" and labels[-1] == "place of birth"
    by_status = [task.status for task in queue.client.get(reverse("queue"), {"sort": "status"}).context["page"].object_list]
    assert by_status == sorted(by_status)


def test_an_unusable_filter_value_is_named_and_lists_nothing(queue):
    response = queue.client.get(reverse("queue"), {"confidence_min": "high"})
    assert response.status_code == 400
    assert "confidence_min" in response.content.decode() and 'id="queue-table"' not in response.content.decode()


def test_rows_show_status_verdict_confidence_agreement_and_assignee(queue):
    page = queue.client.get(reverse("queue")).content.decode()
    overridden_row = page.split(f'data-task-id="{queue.overridden.pk}"')[1].split("</tr>")[0]
    assert "badge status-reviewed" in overridden_row and "badge verdict-correct" in overridden_row
    assert "0.60" in overridden_row and "disagrees" in overridden_row
    running_row = page.split(f'data-task-id="{queue.running.pk}"')[1].split("</tr>")[0]
    assert 'data-live="true"' in running_row and ">me</span>" in running_row and "badge status-running" in running_row
    run = queue.correct.runs.get()
    assert f'href="/runs/{run.pk}/"' in page  # the verdict links to the run that reached it


def test_assigned_to_me_is_one_click_and_row_links_carry_the_filters_to_the_run_page(queue):
    page = queue.client.get(reverse("queue")).content.decode()
    assert 'href="?assignee=me" id="mine-toggle">Assigned to me <span class="n">1</span>' in page
    mine = queue.client.get(reverse("queue"), {"assignee": "me"})
    assert shown(mine) == [queue.running.pk]
    link = f'href="/tasks/{queue.running.pk}/?queue=assignee%3D{queue.me.pk}"'
    assert link in mine.content.decode()  # "me" is spelled out as the user id for the run page's previous/next


def test_pagination_keeps_the_filters(make_user):
    world = make_world()
    client = client_for(make_user, "viewer")
    combos = [(h, r, t) for h in world.entities for r in world.relations for t in world.entities if h != t]
    for head, relation, tail in combos[:30]:
        world.task(head, relation, tail)
    for head, relation, tail in combos[30:33]:
        world.task(head, relation, tail, status=Status.VERIFIED)
    first = client.get(reverse("queue"), {"status": "pending", "per_page": "25"})
    assert len(shown(first)) == 25 and first.context["page"].paginator.count == 30
    next_link = first.content.decode().split('rel="next"')[0].rsplit('href="', 1)[1].split('"')[0]
    assert parse_qs(urlsplit(next_link.replace("&amp;", "&")).query) == {"status": ["pending"], "per_page": ["25"], "page": ["2"]}
    second = client.get(reverse("queue") + next_link.replace("&amp;", "&"))
    assert len(shown(second)) == 5 and not set(shown(first)) & set(shown(second))
    assert {t.status for t in second.context["page"].object_list} == {Status.PENDING}


def _row(html: str, task) -> str:
    return html.split(f'data-task-id="{task.pk}"')[1].split("</tr>")[0]


def test_live_rows_are_the_pages_own_rows_with_the_views_links(queue):
    queue.correct.runs.update(signals=["forced", "looped"])
    view = {"status": "verified,running"}
    page = queue.client.get(reverse("queue"), view).content.decode()
    rows_url = re.search(r'id="queue-table" data-rows-url="([^"]+)"', page).group(1).replace("&amp;", "&")
    assert parse_qs(urlsplit(rows_url).query) == {"queue": ["status=verified%2Crunning"]}
    response = queue.client.get(f"{rows_url}&tasks={queue.running.pk},{queue.correct.pk}")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/html")
    rows = response.content.decode()
    assert re.findall(r'<tr data-task-id="(\d+)" id="task-row-\1"', rows) == [str(queue.correct.pk), str(queue.running.pk)]
    for task in (queue.correct, queue.running):
        assert _row(rows, task) == _row(page, task)  # one renderer: the row the page shows
    assert 'data-live="true"' in _row(rows, queue.running) and 'data-live' not in _row(rows, queue.correct)
    assert 'data-signal="forced"' in _row(rows, queue.correct) and "⚠ looped" in _row(rows, queue.correct)
    assert f'href="/tasks/{queue.correct.pk}/?queue=status%3Dverified%252Crunning"' in _row(rows, queue.correct)


def test_live_rows_have_the_graph_column_when_the_page_has_it(queue):
    other = KnowledgeGraph.objects.create(name="other-kg")
    head, tail = (Entity.objects.create(kg=other, external_id=f"X{n}", label=f"X{n}") for n in (1, 2))
    VerificationTask.objects.create(kg=other, head=head, relation=Relation.objects.create(kg=other, external_id="R1"), tail=tail)
    page = queue.client.get(reverse("queue")).content.decode()
    rows_url = re.search(r'data-rows-url="([^"]+)"', page).group(1).replace("&amp;", "&")
    assert "graph=1" in rows_url and "<th>Graph</th>" in page
    rows = queue.client.get(f"{rows_url}&tasks={queue.running.pk}").content.decode()
    assert '<td class="graph">' in rows and _row(rows, queue.running) == _row(page, queue.running)


def test_live_rows_refuse_a_task_list_that_is_not_ids(queue):
    response = queue.client.get(reverse("queue-rows"), {"tasks": "1,two"})
    assert response.status_code == 400 and response.content.decode().startswith("tasks: 'two' is not an id")


def _dispute(task, reason: str) -> Run:
    run = task.runs.exclude(verdict="").get()
    run.disputed, run.assessment = True, {"p_true": 0.31, "agent_verdict": run.verdict, "disputed_reason": reason}
    run.save(update_fields=["disputed", "assessment"])
    return run


@pytest.mark.parametrize(("value", "expected"), [
    ("true", ["correct", "overridden"]),
    ("false", ["pending", "incorrect", "agreed", "running"]),  # tasks without a verdict are not disputed
])
def test_the_disputed_filter_keeps_or_drops_the_tasks_whose_verdict_the_structure_disputes(queue, value, expected):
    _dispute(queue.correct, "ComplEx gives the triple 0.08 while the agent says Correct.")
    _dispute(queue.overridden, "The rules contradict the verdict.")
    assert set(shown(queue.client.get(reverse("queue"), {"disputed": value}))) == {getattr(queue, name).pk for name in expected}


def test_a_disputed_verdict_carries_a_badge_with_its_reason_in_its_row_and_its_live_row(queue):
    _dispute(queue.correct, "ComplEx gives the triple 0.08 while the agent says Correct.")
    page = queue.client.get(reverse("queue")).content.decode()
    row = page.split(f'data-task-id="{queue.correct.pk}"')[1].split("</tr>")[0]
    assert 'class="badge disputed"' in row and 'title="ComplEx gives the triple 0.08 while the agent says Correct."' in row
    other = page.split(f'data-task-id="{queue.incorrect.pk}"')[1].split("</tr>")[0]
    assert "badge disputed" not in other
    # named for what it filters: the structural evidence's dispute, not the reviewers' (the Review filter's "split")
    assert '>Structural evidence <select name="disputed">' in page and '<option value="true">disputes the verdict</option>' in page
    rows = queue.client.get(reverse("queue-rows"), {"tasks": f"{queue.correct.pk},{queue.incorrect.pk}"}).content.decode()
    assert 'title="ComplEx gives the triple 0.08 while the agent says Correct."' in _row(rows, queue.correct)
    assert "badge disputed" not in _row(rows, queue.incorrect)


def test_an_unknown_disputed_value_is_named(queue):
    response = queue.client.get(reverse("queue"), {"disputed": "maybe"})
    assert response.status_code == 400 and "disputed: unknown value &#x27;maybe&#x27;" in response.content.decode()


def test_the_disputed_filter_travels_to_the_run_pages_previous_and_next(queue):
    _dispute(queue.correct, "reason")
    page = queue.client.get(reverse("queue"), {"disputed": "true"}).content.decode()
    assert f'href="/tasks/{queue.correct.pk}/?queue=disputed%3Dtrue"' in page
    run = queue.correct.runs.latest("pk")
    assert f'href="/runs/{run.pk}/?queue=disputed%3Dtrue">' in page  # the verdict badge opens the run in this view


# ---- bulk actions -----------------------------------------------------------------------------------

def _bulk(client, action, tasks, **extra):
    return client.post(reverse("queue-bulk"), {"action": action, "tasks": [t.pk for t in tasks],
                                               "return_query": "status=pending", **extra})


def test_bulk_assign_gives_the_tasks_to_a_curator_and_audits_each_change(queue, make_user):
    colleague = make_user("curator", "colleague")
    response = _bulk(queue.client, "assign", [queue.pending, queue.correct, queue.running], assignee=colleague.pk)
    assert response.status_code == 302 and response["Location"] == "/?status=pending"
    assert VerificationTask.objects.filter(assignee=colleague).count() == 3
    events = AuditEvent.objects.filter(action="task.assign", actor=queue.me)
    assert events.count() == 3
    assert events.get(object_id=str(queue.running.pk)).before == {"assignee": queue.me.pk}
    assert events.get(object_id=str(queue.running.pk)).after == {"assignee": colleague.pk}
    page = queue.client.get(response["Location"]).content.decode()
    assert "3 task(s) assigned to colleague." in page


def test_bulk_unassign(queue):
    _bulk(queue.client, "assign", [queue.running], assignee="")
    queue.running.refresh_from_db()
    assert queue.running.assignee is None


def test_bulk_run_starts_one_run_per_task_and_leaves_busy_tasks_alone(queue):
    before = Run.objects.count()
    response = _bulk(queue.client, "run", [queue.pending, queue.incorrect, queue.running])
    assert response.status_code == 302
    started = Run.objects.filter(created_by=queue.me, status=Run.Status.QUEUED)
    assert {run.task_id for run in started} == ids(queue.pending, queue.incorrect)  # `running` already had a run
    assert [run.request for run in started] == [{}, {}]  # an investigation with the defaults
    assert Run.objects.count() == before + 2
    assert AuditEvent.objects.filter(action="run.start", actor=queue.me).count() == 2
    page = queue.client.get(response["Location"]).content.decode()
    assert "2 run(s) queued" in page and "1 task(s) already had a run queued or running" in page


def test_bulk_run_can_weigh_the_evidence_only(queue, shipped_weighing):
    page = queue.client.get(reverse("queue")).content.decode()
    assert re.search(r'<select name="kind" id="bulk-kind"[^>]*>\s*<option value="agent">Investigate</option>'
                     r'<option value="evidence">Weigh the evidence only</option>', page)
    response = _bulk(queue.client, "run", [queue.pending, queue.incorrect], kind="evidence")
    started = Run.objects.filter(created_by=queue.me)
    assert [run.request for run in started] == [{"mode": "evidence"}] * 2
    assert "2 run(s) weighing the evidence only queued" in queue.client.get(response["Location"]).content.decode()
    assert Run.objects.get(task=queue.pending, created_by=queue.me).request == {"mode": "evidence"}


def test_bulk_run_of_the_evidence_only_waits_for_a_confidence_model(queue):
    """Weighing the evidence decides only through a confidence model: with none in force the queue offers it
    disabled, saying why, and a bulk run asked for anyway starts nothing and says how to put one in force, instead
    of queueing runs that would each end without a verdict."""
    page = queue.client.get(reverse("queue")).content.decode()
    assert re.search(r'<option value="evidence" disabled title="decides only through a confidence model, and none is '
                     r'in force for [^"]+: activate the shipped one or fit one on the Confidence page">Weigh the evidence '
                     r'only \(needs a confidence model\)</option>', page)
    response = _bulk(queue.client, "run", [queue.pending, queue.incorrect], kind="evidence")
    page = queue.client.get(response["Location"]).content.decode()
    assert "No run started: the evidence mode decides only through a confidence model, and none is in force" in page
    assert "manage.py calibrate --import verifier/data/confidence_model.json" in page
    assert not Run.objects.filter(created_by=queue.me).exists()


def test_bulk_run_refuses_an_unknown_kind_of_run(queue):
    response = _bulk(queue.client, "run", [queue.pending], kind="oracle")
    assert "Select a valid choice. oracle is not one of the available choices." in queue.client.get(response["Location"]).content.decode()
    assert not Run.objects.filter(created_by=queue.me).exists()


def _bulk_matching(client, action, query, **extra):
    return client.post(reverse("queue-bulk"), {"action": action, "matching": "1", "return_query": query, **extra})


def test_a_bulk_action_can_take_every_task_of_the_view_not_only_the_ticked_page(queue, make_user, shipped_weighing):
    response = _bulk_matching(queue.client, "run", "verdict=none&sort=relation", kind="evidence")
    assert response["Location"] == reverse("queue") + "?verdict=none&sort=relation"
    # the view's tasks without a verdict: `running` already had a run and is left alone
    assert {run.task_id for run in Run.objects.filter(created_by=queue.me)} == ids(queue.pending)
    exported = _bulk_matching(queue.client, "export", "status=verified", fmt="csv")
    assert exported_task_ids(exported) == [queue.correct.pk, queue.incorrect.pk]
    _bulk_matching(signed_in(make_user("reviewer", "rex")), "accept", "confidence_min=0.85&status=verified")
    assert [r.run.task_id for r in Review.objects.filter(decision="accept", reviewer__username="rex")] == [queue.correct.pk]


@pytest.mark.parametrize(("query", "message"), [
    ("confidence_min=high", "The view&#x27;s filters cannot be used: confidence_min"),
    ("status=pending&q=nothing+by+this+name", "No task is in this view any more."),
    ("", "This view holds 6 tasks; one action takes at most 5: narrow the filters."),
])
def test_a_bulk_action_on_the_whole_view_says_why_it_cannot_be_taken(queue, monkeypatch, query, message):
    monkeypatch.setattr(forms, "MAX_BULK", 5)
    response = _bulk_matching(queue.client, "run", query)
    assert message in queue.client.get(response["Location"]).content.decode()
    assert not Run.objects.filter(created_by=queue.me).exists()


def test_the_queue_offers_the_whole_view_only_when_it_has_more_than_a_page(queue):
    assert 'id="select-matching"' not in queue.client.get(reverse("queue")).content.decode()
    for head in ("Q145", "Q350", "Q142"):
        for relation in ("P19", "P27"):
            for tail in ("Q42", "Q145", "Q350", "Q142"):
                queue.world.task(head, relation, tail)
    page = queue.client.get(reverse("queue"), {"per_page": "25"}).content.decode()
    assert re.search(r'id="select-matching" hidden data-count="(\d+)" data-max="1000"', page).group(1) == "30"


def exported_task_ids(response) -> list[int]:
    assert response.status_code == 200 and response["Content-Disposition"].startswith("attachment; filename=")
    return [int(row["task_id"]) for row in csv.DictReader(io.StringIO(response.content.decode()))]


def test_bulk_export_answers_the_form_with_the_ticked_tasks_file(make_user, queue):
    viewer = client_for(make_user, "viewer")
    response = _bulk(viewer, "export", [queue.correct, queue.pending], fmt="csv")
    assert exported_task_ids(response) == [queue.correct.pk]
    assert response["X-KGV-Skipped-Tasks"] == str(queue.pending.pk)  # no finished run to export


def test_a_bulk_export_with_nothing_to_export_says_why_on_the_queue(make_user, queue, monkeypatch):
    viewer = client_for(make_user, "viewer")
    response = _bulk(viewer, "export", [queue.pending], fmt="json")
    assert response["Location"] == reverse("queue") + "?status=pending"
    assert "Nothing exported: none of these tasks has a finished run to export." in viewer.get(response["Location"]).content.decode()
    monkeypatch.setitem(exports.FORMATS, "html", dataclasses.replace(exports.FORMATS["html"], max_runs=1))
    page = viewer.get(_bulk(viewer, "export", [queue.correct, queue.incorrect], fmt="html")["Location"]).content.decode()
    assert "Nothing exported: a html report covers at most 1 runs; export 2 runs as json, csv, ttl or jsonld." in page


def test_a_viewer_may_export_but_not_run_or_assign(make_user, queue):
    viewer = client_for(make_user, "viewer")
    before = Run.objects.count()
    assert _bulk(viewer, "run", [queue.pending]).status_code == 403
    assert _bulk(viewer, "assign", [queue.pending], assignee=queue.me.pk).status_code == 403
    assert Run.objects.count() == before and VerificationTask.objects.get(pk=queue.pending.pk).assignee is None


def test_bulk_without_a_ticked_task_explains_and_changes_nothing(queue):
    response = queue.client.post(reverse("queue-bulk"), {"action": "run"}, follow=True)
    assert "Tick at least one task first." in response.content.decode()
    assert not Run.objects.filter(created_by=queue.me).exists()


def test_audit_log_shows_who_did_what_with_before_and_after_and_filters_by_action(queue, make_user):
    _bulk(queue.client, "assign", [queue.pending], assignee=queue.me.pk)
    _bulk(queue.client, "run", [queue.pending])
    admin = client_for(make_user, "admin")
    page = admin.get(reverse("audit-log")).content.decode()
    assert "<code>task.assign</code>" in page and "<code>run.start</code>" in page
    assert "{&quot;assignee&quot;: null}" in page and f"{{&quot;assignee&quot;: {queue.me.pk}}}" in page
    assert f'href="/tasks/{queue.pending.pk}/"' in page
    only = admin.get(reverse("audit-log"), {"action": "run.start"})
    assert [e.action for e in only.context["page"].object_list] == ["run.start"]
    assert only.context["page"].object_list[0].actor == queue.me


@pytest.mark.parametrize("actor", ["name", "id"])
def test_the_audit_page_and_api_filter_alike_by_action_prefix_and_by_actor_name_or_id(queue, make_user, actor):
    _bulk(queue.client, "assign", [queue.pending], assignee=queue.me.pk)
    _bulk(queue.client, "run", [queue.pending])
    admin = client_for(make_user, "admin")
    who = queue.me.get_username() if actor == "name" else str(queue.me.pk)
    for action, expected in (("run.", ["run.start"]), ("task.assign", ["task.assign"]), ("task.", ["task.assign"])):
        params = {"action": action, "actor": who}
        page = [e.action for e in admin.get(reverse("audit-log"), params).context["page"].object_list]
        api = [e["action"] for e in admin.get("/api/audit/", params).json()["results"]]
        assert page == api == expected, action



def test_the_filters_offer_the_graphs_and_relations_of_the_tasks_in_view_by_graph_name(queue):
    VerificationTask.objects.filter(pk=queue.pending.pk).update(source="evaluation:codex-kge-400 (valid)")
    other = KnowledgeGraph.objects.create(name="other-kg", title="Another KG")
    unused = Relation.objects.create(kg=other, external_id="P31", label="instance of")
    Relation.objects.create(kg=queue.world.kg, external_id="P999", label="never queued")

    def offered(params=None):
        context = queue.client.get(reverse("queue"), params or {}).context
        return {kg.name for kg in context["kgs"]}, {relation.label for relation in context["relations"]}

    # the work queue: its own relations only, not the evaluation's P27 nor relations no task has
    assert offered() == ({"runs-kg"}, {"place of birth", "country"})
    assert offered({"origin": "all"}) == ({"runs-kg"}, {"place of birth", "country", "country of citizenship"})
    entity = Entity.objects.create(kg=other, external_id="Q1", label="Earth")
    VerificationTask.objects.create(kg=other, head=entity, relation=unused, tail=entity)
    kgs, relations = offered()
    assert kgs == {"runs-kg", "other-kg"} and "instance of" in relations
    page = queue.client.get(reverse("queue")).content.decode()
    assert '<optgroup label="other-kg">' in page and '<optgroup label="runs-kg">' in page
    assert f">instance of ({other.pk})<" not in page and ">instance of<" in page  # grouped by name, not id-suffixed


# ---- work queue and evaluations, sources -------------------------------------------------------------

def test_evaluation_tasks_stay_out_of_the_work_queue_unless_asked_for(queue):
    VerificationTask.objects.filter(pk=queue.pending.pk).update(source="evaluation:codex-kge-400 (valid)")
    VerificationTask.objects.filter(pk=queue.correct.pk).update(source="flagged-2026-11.csv:2")
    work = set(shown(queue.client.get(reverse("queue"))))
    assert queue.pending.pk not in work and queue.correct.pk in work
    page = queue.client.get(reverse("queue")).content.decode()
    assert re.search(r'<h1>Queue <span class="muted count">5 flagged triples', page)  # counts follow the view
    assert shown(queue.client.get(reverse("queue"), {"origin": "evaluation"})) == [queue.pending.pk]
    assert len(shown(queue.client.get(reverse("queue"), {"origin": "all"}))) == 6
    assert shown(queue.client.get(reverse("queue"), {"source": "FLAGGED-2026"})) == [queue.correct.pk]
    assert shown(queue.client.get(reverse("queue"), {"origin": "all", "source": "codex-kge"})) == [queue.pending.pk]
    assert queue.client.get(reverse("queue"), {"origin": "benchmarks"}).status_code == 400
    api = queue.client.get("/api/tasks/", {"origin": "evaluation"}).json()
    assert [task["id"] for task in api["results"]] == [queue.pending.pk]
    assert queue.pending.pk not in {task["id"] for task in queue.client.get("/api/tasks/").json()["results"]}


def test_the_relation_filter_takes_an_id_the_kgs_id_or_a_label(queue):
    relation = queue.world.relations["P17"]
    expected = ids(queue.agreed, queue.overridden, queue.running)
    for value in (str(relation.pk), "P17", "COUNTRY"):
        assert set(shown(queue.client.get(reverse("queue"), {"relation": value}))) == expected, value
    assert {t["id"] for t in queue.client.get("/api/tasks/", {"relation": "country"}).json()["results"]} == expected
    assert shown(queue.client.get(reverse("queue"), {"relation": "spouse"})) == []


# (reviewer, decision, verdict) in the order given, on a run whose verdict is "correct"; the agreement expected
AGREEMENT_CASES = [
    ([], "unreviewed"),
    ([("a", "comment", "")], "unreviewed"),
    ([("a", "accept", "correct")], "agree"),
    ([("a", "override", "incorrect")], "disagree"),
    ([("a", "not_enough_evidence", "not_enough_evidence")], "disagree"),
    ([("a", "accept", "correct"), ("b", "override", "incorrect")], "split"),
    ([("a", "accept", "correct"), ("b", "override", "incorrect"), ("b", "accept", "correct")], "agree"),
    ([("a", "override", "incorrect"), ("b", "override", "incorrect"), ("b", "comment", "")], "disagree"),
]


@pytest.mark.parametrize(("decisions", "expected"), AGREEMENT_CASES)
def test_the_queue_the_run_page_and_the_exports_say_the_same_agreement(make_user, decisions, expected):
    from verifier.exports.records import select

    world = make_world()
    reviewers = {name: make_user("reviewer", f"rev-{name}") for name in {n for n, _, _ in decisions}}
    task = world.task("Q42", "P27", "Q145", status=Status.VERIFIED)
    run = _finished(task, "correct", 0.7)
    for name, decision, verdict in decisions:
        Review.objects.create(run=run, reviewer=reviewers[name], decision=decision, verdict=verdict)
    queue_row = filter_tasks(VerificationTask.objects.filter(pk=task.pk), {}).get()
    assert queue_row.agreement == expected
    (record,) = select(run_ids=[run.pk]).records
    assert record.agreement == expected
    page_state = review_state(list(run.reviews.all())).state
    assert (page_state == "split") == (expected == "split") and (page_state == "unreviewed") == (expected == "unreviewed")
    assert shown(signed_in(make_user("curator", "cu")).get("/", {"agreement": expected, "origin": "all"})) == [task.pk]


def test_a_reviewer_accepts_the_ticked_verdicts_in_one_step_and_each_is_audited(queue, make_user):
    reviewer = client_for(make_user, "reviewer")
    response = _bulk(reviewer, "accept", [queue.correct, queue.incorrect, queue.pending, queue.overridden, queue.running])
    assert response.status_code == 302
    for task, verdict in ((queue.correct, "correct"), (queue.incorrect, "incorrect")):
        task.refresh_from_db()
        review = Review.objects.get(run__task=task)
        assert task.status == Status.REVIEWED and review.decision == "accept" and review.verdict == verdict
    assert AuditEvent.objects.filter(action="review.accept").count() == 2
    # no verdict yet (pending, running) or a reviewer's decision already stands (overridden): left alone
    assert Review.objects.get(run__task=queue.overridden).decision == "override"
    assert not Review.objects.filter(run__task__in=[queue.pending, queue.running]).exists()
    page = reviewer.get(response["Location"]).content.decode()
    assert "2 verdict(s) accepted." in page and "3 task(s) had no finished verdict or were already reviewed" in page
    assert 'id="bulk-accept"' in page


def test_accepting_verdicts_in_bulk_needs_the_reviewer_role(queue):
    assert _bulk(queue.client, "accept", [queue.correct]).status_code == 403  # a curator
    assert not Review.objects.filter(run__task=queue.correct).exists()
    assert 'id="bulk-accept"' not in queue.client.get(reverse("queue")).content.decode()
