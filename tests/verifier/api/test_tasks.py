"""The queue: filters (shared with the queue page through verifier.queue_filters), pagination, import, bulk actions."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.http import QueryDict
from django.urls import reverse

from tests.verifier.exports.verified_runs import add_review, make_finished_run, make_task
from verifier.models import AuditEvent, Review, Run, VerificationTask
from verifier.queue_filters import QueueFilterError, filter_tasks

pytestmark = pytest.mark.django_db


@pytest.fixture
def queue(light_kg, make_user):
    """Five tasks in every state the filters distinguish."""
    curator, reviewer = make_user("curator", "cora"), make_user("reviewer", "rita")
    agreed = make_task(light_kg, "Q42", "P27", "Q145", assignee=curator)
    add_review(make_finished_run(agreed, verdict="correct", confidence=0.9), reviewer)
    overridden = make_task(light_kg, "Q42", "P19", "Q350")
    add_review(make_finished_run(overridden, verdict="incorrect", confidence=0.4), reviewer, "override", "correct", "Wrong.")
    rerun = make_task(light_kg, "Q90", "P17", "Q142")
    make_finished_run(rerun, verdict="incorrect", confidence=0.2)
    latest = make_finished_run(rerun, verdict="correct", confidence=0.6)
    add_review(latest, reviewer, "comment", reason="Looks fine.")  # a comment is no decision
    pending = make_task(light_kg, "Q25", "P131", "Q145")
    requeued = make_task(light_kg, "Q145", "P47", "Q142")
    make_finished_run(requeued, verdict="correct", confidence=0.7)
    Run.objects.create(task=requeued, status=Run.Status.QUEUED)
    return {"agreed": agreed, "overridden": overridden, "rerun": rerun, "pending": pending, "requeued": requeued,
            "curator": curator}


def ids(queryset) -> list[int]:
    return [task.pk for task in queryset]


def pick(queue, *names) -> list[int]:
    return [queue[name].pk for name in names]


def run_filter(params: str, user=None):
    return filter_tasks(VerificationTask.objects.all(), QueryDict(params), user=user)


def test_verdict_filter_uses_the_latest_run_with_a_verdict(queue):
    assert sorted(ids(run_filter("verdict=correct"))) == sorted(pick(queue, "agreed", "rerun", "requeued"))
    assert ids(run_filter("verdict=incorrect")) == pick(queue, "overridden")
    assert ids(run_filter("verdict=none")) == pick(queue, "pending")
    task = run_filter("").get(pk=queue["requeued"].pk)
    assert task.latest_run_status == "queued" and task.verdict == "correct" and task.confidence == pytest.approx(0.7)


def test_agreement_with_the_reviewer(queue):
    assert ids(run_filter("agreement=agree")) == pick(queue, "agreed")
    assert ids(run_filter("agreement=disagree")) == pick(queue, "overridden")
    assert sorted(ids(run_filter("agreement=unreviewed"))) == sorted(pick(queue, "rerun", "pending", "requeued"))
    assert sorted(ids(run_filter("agreement=agree,disagree"))) == sorted(pick(queue, "agreed", "overridden"))


def test_status_relation_confidence_assignee_and_search(queue, light_kg):
    everything_but_reviewed = pick(queue, "rerun", "pending", "requeued", "agreed", "overridden")
    assert sorted(ids(run_filter("status=pending&status=verified"))) == sorted(everything_but_reviewed)
    assert ids(run_filter("status=pending")) == pick(queue, "pending")
    relation = light_kg.relations.get(external_id="P19")
    assert ids(run_filter(f"relation={relation.pk}")) == pick(queue, "overridden")
    assert sorted(ids(run_filter("confidence_min=0.5&confidence_max=0.8"))) == sorted(pick(queue, "rerun", "requeued"))
    assert ids(run_filter("assignee=me", user=queue["curator"])) == pick(queue, "agreed")
    assert ids(run_filter(f"assignee={queue['curator'].pk}")) == pick(queue, "agreed")
    assert queue["agreed"].pk not in ids(run_filter("assignee=none"))
    assert sorted(ids(run_filter("q=paris"))) == sorted(pick(queue, "rerun"))
    assert sorted(ids(run_filter("q=birth"))) == pick(queue, "overridden")
    assert sorted(ids(run_filter("q=Q145"))) == sorted(pick(queue, "agreed", "pending", "requeued"))


def test_sorting_by_confidence_puts_tasks_without_a_verdict_last(queue):
    assert ids(run_filter("sort=confidence")) == pick(queue, "overridden", "rerun", "requeued", "agreed", "pending")
    assert ids(run_filter("sort=-confidence")) == pick(queue, "agreed", "requeued", "rerun", "overridden", "pending")
    assert ids(run_filter("sort=head"))[:2] == sorted(pick(queue, "agreed", "overridden"))  # Douglas Adams first
    with pytest.raises(QueueFilterError, match="sort"):
        run_filter("sort=colour")


def test_the_api_list_applies_the_same_filters_and_paginates(queue, client_as):
    client = client_as("viewer")
    body = client.get(reverse("api:task-list") + "?verdict=correct&sort=-confidence&page_size=2").json()
    assert body["count"] == 3 and [t["id"] for t in body["results"]] == pick(queue, "agreed", "requeued")
    assert body["next"] and body["previous"] is None
    first = body["results"][0]
    assert first["head"]["label"] == "Douglas Adams" and first["agreement"] == "agree" and first["assignee"]["username"] == "cora"
    page2 = client.get(body["next"]).json()
    assert [t["id"] for t in page2["results"]] == pick(queue, "rerun")
    detail = client.get(reverse("api:task-detail", args=[queue["overridden"].pk])).json()
    assert (detail["verdict"], detail["agreement"], detail["confidence"]) == ("incorrect", "disagree", 0.4)


def _dispute(run: Run, reason: str = "The structural model disagrees.") -> None:
    run.disputed, run.assessment = True, {"disputed_reason": reason, "p_true": 0.2}
    run.save(update_fields=["disputed", "assessment"])


def test_the_disputed_filter_follows_the_latest_verdict(queue):
    _dispute(queue["agreed"].runs.get())
    _dispute(queue["rerun"].runs.order_by("id").first())  # an older verdict: the latest one is not disputed
    assert ids(run_filter("disputed=true")) == pick(queue, "agreed")
    assert sorted(ids(run_filter("disputed=false"))) == sorted(pick(queue, "overridden", "rerun", "pending", "requeued"))
    with pytest.raises(QueueFilterError, match="disputed"):
        run_filter("disputed=sometimes")


def test_the_api_list_filters_on_disputed_and_says_which_verdicts_are(queue, client_as):
    _dispute(queue["agreed"].runs.get())
    client = client_as("viewer")
    disputed = client.get(reverse("api:task-list") + "?disputed=true").json()["results"]
    assert [(t["id"], t["disputed"]) for t in disputed] == [(queue["agreed"].pk, True)]
    others = {t["id"]: t["disputed"] for t in client.get(reverse("api:task-list") + "?disputed=false").json()["results"]}
    assert others == {queue["overridden"].pk: False, queue["rerun"].pk: False, queue["requeued"].pk: False,
                      queue["pending"].pk: None}  # no verdict yet: nothing to dispute
    refused = client.get(reverse("api:task-list") + "?disputed=perhaps")
    assert refused.status_code == 400 and "disputed" in refused.content.decode()


def test_assignee_me_in_the_api_is_the_caller(queue, client):
    client.force_login(queue["curator"])
    results = client.get(reverse("api:task-list") + "?assignee=me").json()["results"]
    assert [t["id"] for t in results] == pick(queue, "agreed")


def test_import_queues_good_rows_and_reports_the_skipped_ones(light_kg, client_as):
    body = "head,relation,tail,label\nCambridge,country,United Kingdom,true\nNobody,country,France,false\nUK,shares border with,France,1\n"
    response = client_as("curator").post(reverse("api:task-import"), {
        "kg": light_kg.pk, "skip_invalid": "true", "file": SimpleUploadedFile("flagged.csv", body.encode())}, format="multipart")
    assert response.status_code == 201, response.content
    result = response.json()
    assert (result["created"], result["already_queued"], result["lines"]) == (2, 0, 3), result
    assert [row["line"] for row in result["skipped"]] == [3]
    sources = sorted(VerificationTask.objects.filter(kg=light_kg).values_list("source", flat=True))
    assert sources == ["flagged.csv:2", "flagged.csv:4"]
    assert AuditEvent.objects.filter(action="tasks.import").count() == 1


def test_import_reads_tab_separated_files_by_their_suffix(light_kg, client_as):
    upload = SimpleUploadedFile("flagged.tsv", b"Q90\tP17\tQ142\n")
    response = client_as("curator").post(reverse("api:task-import"), {"kg": light_kg.pk, "file": upload}, format="multipart")
    assert response.status_code == 201 and response.json()["created"] == 1


def test_bulk_run_queues_one_run_per_task_and_audits_it(queue, client_as):
    wanted = pick(queue, "pending", "rerun")
    response = client_as("curator").post(reverse("api:task-bulk"), {"action": "run", "ids": wanted, "config": {"t_max": 4}},
                                         format="json")
    assert response.status_code == 200, response.content
    runs = Run.objects.filter(pk__in=response.json()["runs"])
    assert sorted(runs.values_list("task_id", flat=True)) == sorted(wanted)
    assert all(run.status == "queued" and run.config["t_max"] == 4 for run in runs)
    assert AuditEvent.objects.filter(action="run.start", object_id__in=[str(r.pk) for r in runs]).count() == 2


def test_bulk_assign_and_unassign(queue, client_as, make_user):
    client, worker = client_as("curator"), make_user("curator", "wes")
    url = reverse("api:task-bulk")
    response = client.post(url, {"action": "assign", "ids": pick(queue, "pending", "rerun"), "assignee": worker.pk}, format="json")
    assert response.json() == {"action": "assign", "changed": 2}
    assert set(VerificationTask.objects.filter(assignee=worker).values_list("pk", flat=True)) == set(pick(queue, "pending", "rerun"))
    event = AuditEvent.objects.filter(action="task.assign", object_id=str(queue["pending"].pk)).get()
    assert event.before == {"assignee": None} and event.after == {"assignee": worker.pk}
    assert client.post(url, {"action": "assign", "ids": pick(queue, "pending"), "assignee": None}, format="json").json()["changed"] == 1
    assert VerificationTask.objects.get(pk=queue["pending"].pk).assignee is None


def test_bulk_assign_refuses_viewers_and_unknown_tasks(queue, client_as, make_user):
    client = client_as("curator")
    response = client.post(reverse("api:task-bulk"), {"action": "assign", "ids": pick(queue, "pending"),
                                                      "assignee": make_user("viewer").pk}, format="json")
    assert response.status_code == 400 and "curator role" in response.json()["error"]["details"]["assignee"][0]
    response = client.post(reverse("api:task-bulk"), {"action": "run", "ids": [*pick(queue, "pending"), 999999]}, format="json")
    assert response.status_code == 400 and "999999" in response.json()["error"]["details"]["ids"][0]
    assert not Run.objects.filter(task=queue["pending"]).exists()


def test_bulk_accept_records_an_accept_review_per_undecided_verdict(queue, client_as):
    url = reverse("api:task-bulk")
    wanted = pick(queue, "agreed", "rerun", "pending", "requeued")
    assert client_as("curator").post(url, {"action": "accept", "ids": wanted}, format="json").status_code == 403
    response = client_as("reviewer").post(url, {"action": "accept", "ids": wanted}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    # rerun: its newest verdict (correct, commented on, not decided); requeued: its finished verdict while a new run
    # waits; agreed already has a reviewer's decision and pending no verdict: both left alone
    assert body["action"] == "accept" and body["left"] == 2 and len(body["reviews"]) == 2
    accepted = {(r.run.task_id, r.verdict) for r in Review.objects.filter(pk__in=body["reviews"])}
    assert accepted == {(queue["rerun"].pk, "correct"), (queue["requeued"].pk, "correct")}
    assert AuditEvent.objects.filter(action="review.accept").count() == 2
