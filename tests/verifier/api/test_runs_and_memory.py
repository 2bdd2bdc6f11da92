"""Runs (start, follow, cancel, review, promote) and the memory bank through the API."""

import pytest
from django.urls import reverse

from tests.verifier.exports.verified_runs import add_memory
from tests.verifier.web.structure_rows import ready
from verifier.agent.config import AgentConfig
from verifier.memory import bank
from verifier.models import AuditEvent, MemoryEntry, Run, VerificationTask
from verifier.models.memory import UNREVIEWED

pytestmark = pytest.mark.django_db


def test_starting_a_run_queues_it_with_the_requested_config_settled(verified, client_as):
    # What the request leaves open (the profile and its defaults) is settled when the run is created, from the
    # configured endpoint (none here: the embedded model's compact profile); the request is kept as given.
    response = client_as("curator").post(reverse("api:run-list"), {"task": verified["task"].pk, "config": {"t_max": 3}}, format="json")
    assert response.status_code == 201, response.content
    run = Run.objects.get(pk=response.json()["id"])
    assert run.status == "queued" and run.request == {"t_max": 3}
    assert run.config == AgentConfig.from_dict({**run.config, "t_max": 3, "profile": "compact", "memory_k": 2}).to_dict()
    assert response.json()["config"] == run.config
    assert response.json()["created_by"]["username"].startswith("curator")


def test_run_detail_has_memories_evidence_reviews_and_the_trajectory(verified, client_as):
    body = client_as("viewer").get(reverse("api:run-detail", args=[verified["run"].pk])).json()
    assert body["triple"] == "(Douglas Adams, country of citizenship, United Kingdom)"
    assert body["memories_used"] == [{"entry": verified["memory"].pk, "rank": 1, "similarity": 0.83,
                                      "triple_text": "Douglas Adams place of birth Cambridge", "verdict": "correct", "status": "active"}]
    assert [(i["key"], i["cited"], i["step_seq"]) for i in body["support_items"]] == [("E1", True, 4), ("E2", True, 4), ("E3", False, 4)]
    assert body["reviews"][0]["decision"] == "accept" and body["reviews"][0]["reviewer"]["username"] == "rene"
    assert body["step_count"] == 5 and body["trajectory"].startswith("Thought: Check where he was born.")


def test_runs_carry_their_dispute_assessment_and_the_structural_model_that_scored_them(verified, client_as):
    run = verified["run"]
    model = ready(verified["kg"])
    assessment = {"p_true": 0.12, "agent_verdict": "correct", "structural_probability": 0.05, "rule_probability": None,
                  "reading": {"supports": 1, "contradicts": 0, "silent": 1}, "confidence_model": None,
                  "disputed_reason": "The structural model gives the triple 0.05 while the agent says Correct."}
    Run.objects.filter(pk=run.pk).update(confidence=0.64, disputed=True, assessment=assessment, structural_model=model)
    client = client_as("viewer")
    detail = client.get(reverse("api:run-detail", args=[run.pk])).json()
    assert (detail["confidence"], detail["disputed"], detail["assessment"]) == (0.64, True, assessment)
    assert detail["structural_model"] == {"id": model.pk, "description": f"ComplEx model #{model.pk} of {verified['kg'].name} v1"}
    [listed] = client.get(reverse("api:run-list") + f"?task={verified['task'].pk}").json()["results"]
    assert listed["disputed"] is True and listed["structural_model"]["id"] == model.pk
    older = Run.objects.create(task=verified["task"], status=Run.Status.SUCCEEDED, verdict="correct")
    body = client.get(reverse("api:run-detail", args=[older.pk])).json()
    assert (body["disputed"], body["assessment"], body["structural_model"]) == (False, {}, None)


def test_run_assessment_is_read_only(verified, client_as):
    response = client_as("admin").patch(reverse("api:run-detail", args=[verified["run"].pk]), {"disputed": True}, format="json")
    assert response.status_code == 405 and Run.objects.get(pk=verified["run"].pk).disputed is False


def test_steps_resume_after_the_last_seen_sequence_number(verified, client_as):
    client = client_as("viewer")
    url = reverse("api:run-steps", args=[verified["run"].pk])
    assert [s["seq"] for s in client.get(url).json()] == [1, 2, 3, 4, 5]
    assert [(s["seq"], s["kind"]) for s in client.get(url + "?after=3").json()] == [(4, "observation"), (5, "verdict")]
    assert client.get(url + "?after=-1").status_code == 400


def test_runs_filter_by_task_and_status(verified, client_as):
    queued = Run.objects.create(task=verified["task"], status=Run.Status.QUEUED)
    client = client_as("viewer")
    listed = client.get(reverse("api:run-list") + f"?task={verified['task'].pk}&status=queued").json()["results"]
    assert [r["id"] for r in listed] == [queued.pk]
    assert client.get(reverse("api:run-list") + "?status=sleeping").status_code == 400


def test_cancel_stops_a_queued_run_and_audits_it(verified, client_as):
    queued = Run.objects.create(task=verified["task"], status=Run.Status.QUEUED)
    response = client_as("curator").post(reverse("api:run-cancel", args=[queued.pk]))
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    event = AuditEvent.objects.get(action="run.cancel", object_id=str(queued.pk))
    assert event.before == {"status": "queued"} and event.after == {"status": "cancelled"}


def test_a_reviewer_override_settles_the_task(verified, client_as):
    response = client_as("reviewer").post(reverse("api:run-reviews", args=[verified["run"].pk]),
                                          {"decision": "override", "reason": "He was British, not a citizen of that state."}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["verdict"] == "incorrect" and response.json()["decision"] == "override"
    assert VerificationTask.objects.get(pk=verified["task"].pk).status == "reviewed"
    reviews = client_as("viewer").get(reverse("api:run-reviews", args=[verified["run"].pk])).json()
    assert [r["decision"] for r in reviews] == ["override", "accept"]


def test_promote_with_an_edited_trajectory_is_retrieved_first_at_once(verified, client_as):
    edited = "Thought: Citizenship follows birth in Cambridge, UK.\nFinal Answer: [Correct]"
    response = client_as("reviewer").post(reverse("api:run-promote", args=[verified["run"].pk]), {"trajectory": edited}, format="json")
    assert response.status_code == 201, response.content
    entry = MemoryEntry.objects.get(pk=response.json()["id"])
    assert entry.trajectory == edited and entry.source_run_id == verified["run"].pk and entry.promoted_by.username.startswith("reviewer")
    assert bank.retrieve("Douglas Adams country of citizenship United Kingdom", k=1)[0].id == entry.pk
    listed = client_as("viewer").get(reverse("api:memory-list") + "?similar=Douglas Adams country of citizenship United Kingdom").json()
    assert listed["results"][0]["id"] == entry.pk and listed["results"][0]["similarity"] > 0.99
    assert listed["results"][1]["similarity"] < listed["results"][0]["similarity"]


def test_memory_text_search_status_filter_and_uses(verified, client_as):
    other = add_memory(text="Paris country France", verdict="correct")
    client = client_as("viewer")
    assert [e["id"] for e in client.get(reverse("api:memory-list") + "?q=birthplace").json()["results"]] == sorted(
        [verified["memory"].pk, other.pk], reverse=True)  # both trajectories mention it; newest first
    assert [e["id"] for e in client.get(reverse("api:memory-list") + "?q=France").json()["results"]] == [other.pk]
    detail = client.get(reverse("api:memory-detail", args=[verified["memory"].pk])).json()
    assert detail["use_count"] == 1 and detail["uses"][0]["run"] == verified["run"].pk and detail["uses"][0]["similarity"] == 0.83
    assert client.get(reverse("api:memory-list") + "?status=gone").status_code == 400


def test_retire_hides_an_entry_from_retrieval_and_restore_brings_it_back(verified, client_as):
    client, entry = client_as("reviewer"), verified["memory"]
    text = entry.triple_text
    assert client.post(reverse("api:memory-retire", args=[entry.pk])).json()["status"] == "retired"
    assert entry.pk not in [m.id for m in bank.retrieve(text, k=5)]
    assert [e["id"] for e in client.get(reverse("api:memory-list") + "?status=retired").json()["results"]] == [entry.pk]
    assert client.post(reverse("api:memory-restore", args=[entry.pk])).json()["status"] == "active"
    assert bank.retrieve(text, k=1)[0].id == entry.pk
    actions = list(AuditEvent.objects.filter(object_id=str(entry.pk), object_type="verifier.memoryentry").values_list("action", flat=True))
    assert sorted(actions) == ["memory.restore", "memory.retire"]


def test_a_review_sets_the_lesson_and_ends_the_wait_and_a_bad_lesson_is_a_field_error(verified, client_as):
    client, entry = client_as("reviewer"), verified["memory"]
    entry.provenance = f"bootstrapped from run 1; {UNREVIEWED}"
    entry.save()
    assert [e["id"] for e in client.get(reverse("api:memory-list") + "?review=awaiting").json()["results"]] == [entry.pk]
    assert client.get(reverse("api:memory-list") + "?review=soon").status_code == 400
    refused = client.post(reverse("api:memory-review", args=[entry.pk]), {"lesson": "x" * 401}, format="json")
    assert refused.status_code == 400 and "at most 400" in str(refused.json())
    body = client.post(reverse("api:memory-review", args=[entry.pk]), {"lesson": "The KG names his birthplace."}, format="json").json()
    assert body["lesson"] == "The KG names his birthplace." and body["awaits_review"] is False
    assert client.get(reverse("api:memory-list") + "?review=awaiting").json()["results"] == []
    assert client.post(reverse("api:memory-retire", args=[entry.pk]), {"reason": "x" * 301}, format="json").status_code == 400
    retired = client.post(reverse("api:memory-retire", args=[entry.pk]), {"reason": "a duplicate"}, format="json").json()
    assert retired["status"] == "retired" and retired["provenance"].count("reviewed") == 1  # reviewed already: said once


def test_bulk_review_keeps_or_retires_entries_each_as_its_own_review(verified, client_as):
    entry = verified["memory"]
    entry.provenance = f"bootstrapped from run 1; {UNREVIEWED}"
    entry.lesson = "The KG names his birthplace."
    entry.save()
    url = reverse("api:memory-bulk-review")
    assert client_as("viewer").post(url, {"ids": [entry.pk], "action": "keep"}, format="json").status_code == 403
    reviewer = client_as("reviewer")
    assert reviewer.post(url, {"ids": [entry.pk, 999999], "action": "keep"}, format="json").status_code == 400
    assert reviewer.post(url, {"ids": [entry.pk], "action": "burn"}, format="json").status_code == 400
    assert reviewer.post(url, {"ids": [entry.pk], "action": "keep"}, format="json").json() == {"done": [entry.pk], "skipped": []}
    assert reviewer.post(url, {"ids": [entry.pk], "action": "keep"}, format="json").json() == {
        "done": [], "skipped": [{"id": entry.pk, "reason": "reviewed already"}]}
    assert AuditEvent.objects.filter(action="memory.review", object_id=str(entry.pk)).count() == 1
    body = reviewer.post(url, {"ids": [entry.pk], "action": "retire", "reason": "a duplicate"}, format="json").json()
    assert body == {"done": [entry.pk], "skipped": []} and MemoryEntry.objects.get(pk=entry.pk).status == "retired"


def test_the_audit_log_lists_who_did_what_with_before_and_after(verified, client_as, make_user):
    client_as("curator").post(reverse("api:run-list"), {"task": verified["task"].pk}, format="json")
    client_as("reviewer").post(reverse("api:memory-retire", args=[verified["memory"].pk]))
    admin = client_as("admin")
    events = admin.get(reverse("api:audit-list") + "?action=memory.").json()["results"]
    assert [(e["action"], e["before"], e["after"]) for e in events] == [("memory.retire", {"status": "active"}, {"status": "retired"})]
    assert events[0]["actor"]["username"].startswith("reviewer")
    assert [e["action"] for e in admin.get(reverse("api:audit-list") + "?object_type=verifier.run").json()["results"]] == ["run.start"]
