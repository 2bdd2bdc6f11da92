"""The write services: reviews, promotion to the memory bank, retire/restore, assignment; each leaves an audit
event with the values before and after."""

import pytest

from tests.verifier.exports.verified_runs import load_light_kg, make_finished_run, make_task, use_fast_password_hashing
from verifier import services
from verifier.memory import bank
from verifier.models import AuditEvent, FitTriple, MemoryEntry, Review, Run, VerificationTask
from verifier.services import ReviewRejected

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    use_fast_password_hashing(settings)


@pytest.fixture
def light_kg(db):
    return load_light_kg()


@pytest.fixture
def run(light_kg):
    return make_finished_run(make_task(light_kg), verdict="correct")


@pytest.fixture
def reviewed(run, reviewer):
    """The run, its verdict accepted by the reviewer: what may be promoted."""
    services.review_run(run=run, reviewer=reviewer, decision="accept")
    return run


@pytest.fixture
def reviewer(make_user):
    return make_user("reviewer", "rosa")


def audit_of(action: str, obj) -> AuditEvent:
    return AuditEvent.objects.get(action=action, object_type=obj._meta.label_lower, object_id=str(obj.pk))


def task_status(run) -> str:
    return VerificationTask.objects.get(pk=run.task_id).status


def test_accept_keeps_the_agent_verdict_and_settles_the_task(run, reviewer):
    review = services.review_run(run=run, reviewer=reviewer, decision="accept")
    assert review.verdict == "correct" and task_status(run) == "reviewed"
    event = audit_of("review.accept", run)
    assert event.actor == reviewer
    assert event.before == {"task_status": "verified", "verdict": "correct"}
    assert event.after == {"task_status": "reviewed", "verdict": "correct", "reason": "", "review": review.pk}


def test_override_needs_a_reason_and_flips_the_verdict(run, reviewer):
    with pytest.raises(ReviewRejected, match="needs a reason"):
        services.review_run(run=run, reviewer=reviewer, decision="override", reason="  ")
    with pytest.raises(ReviewRejected, match="must change the verdict"):
        services.review_run(run=run, reviewer=reviewer, decision="override", reason="x", verdict="correct")
    assert not Review.objects.filter(run=run).exists() and not AuditEvent.objects.filter(action__startswith="review.").exists()
    review = services.review_run(run=run, reviewer=reviewer, decision="override", reason="Born in Wales.")
    assert review.verdict == "incorrect" and review.reason == "Born in Wales."
    assert audit_of("review.override", run).after["verdict"] == "incorrect"


def test_not_enough_evidence_sets_that_verdict(run, reviewer):
    review = services.review_run(run=run, reviewer=reviewer, decision="not_enough_evidence", reason="Sources disagree.")
    assert review.verdict == "not_enough_evidence" and task_status(run) == "reviewed"
    event = audit_of("review.not_enough_evidence", run)
    assert event.before["verdict"] == "correct" and event.after["verdict"] == "not_enough_evidence"


def test_a_comment_needs_text_and_leaves_the_task_as_it_was(run, make_user):
    curator = make_user("curator")
    with pytest.raises(ReviewRejected, match="needs text"):
        services.review_run(run=run, reviewer=curator, decision="comment")
    review = services.review_run(run=run, reviewer=curator, decision="comment", reason="Check the second passage.")
    assert review.verdict == "" and task_status(run) == "verified"
    event = audit_of("review.comment", run)
    assert event.before["task_status"] == event.after["task_status"] == "verified"


def test_unfinished_runs_cannot_be_decided_or_promoted(light_kg, reviewer):
    queued = Run.objects.create(task=make_task(light_kg, "Q90", "P17", "Q142"), status=Run.Status.QUEUED)
    with pytest.raises(ReviewRejected, match="no verdict to review"):
        services.review_run(run=queued, reviewer=reviewer, decision="accept")
    with pytest.raises(ReviewRejected, match="only a finished run"):
        services.promote_run(run=queued, actor=reviewer)


def test_promote_with_an_edited_trajectory_is_retrieved_first_by_the_next_run(run, reviewer):
    services.review_run(run=run, reviewer=reviewer, decision="override", reason="Wrong state.")
    other = bank.add_entry(triple_text="Paris country France", trajectory="Final Answer: [Correct]", verdict="correct")
    edited = "Thought: The UK is his country of citizenship.\nFinal Answer: [Incorrect] edited by a reviewer"
    entry = services.promote_run(run=run, actor=reviewer, trajectory=edited)
    assert entry.trajectory == edited and entry.verdict == "incorrect"  # the reviewed verdict, not the agent's
    assert entry.triple_text == "Douglas Adams country of citizenship United Kingdom"
    memories = bank.retrieve("Douglas Adams country of citizenship United Kingdom", k=2)
    assert [m.id for m in memories] == [entry.pk, other.pk] and memories[0].trajectory == edited
    event = audit_of("memory.promote", entry)
    assert event.before is None and event.after == {"run": run.pk, "verdict": "incorrect", "edited": True}


def test_a_promoted_triple_is_never_drawn_by_a_benchmark(reviewed, reviewer):
    """Its memory would be retrieved for the same claim at similarity 1 and hand an evaluation the label."""
    from verifier.benchmarks.datasets import fitted_triples

    task = reviewed.task
    assert (task.head_id, task.relation_id, task.tail_id) not in fitted_triples(task.kg)
    services.promote_run(run=reviewed, actor=reviewer)
    assert (task.head_id, task.relation_id, task.tail_id) in fitted_triples(task.kg)
    assert FitTriple.objects.get(kg=task.kg, head_id=task.head_id).label is True  # the reviewed verdict: correct


def test_promote_without_edits_copies_the_run_trajectory(reviewed, reviewer):
    run = reviewed
    entry = services.promote_run(run=run, actor=reviewer)
    assert entry.trajectory == bank.trajectory_of(run) and entry.trajectory.startswith("Thought: Check where he was born.")
    assert audit_of("memory.promote", entry).after["edited"] is False
    assert entry.lesson == bank.lesson_of(run) and entry.lesson.startswith(run.explanation.strip())


def test_an_overridden_run_promoted_teaches_the_curator_reason_not_its_own_evidence(run, reviewer):
    services.review_run(run=run, reviewer=reviewer, decision="override", reason="He was born in Cambridge, not here.")
    entry = services.promote_run(run=run, actor=reviewer)
    assert entry.verdict == "incorrect"
    assert entry.lesson == "A curator overruled the agent's verdict (Correct): He was born in Cambridge, not here."


def test_retire_hides_an_entry_and_restore_returns_it(reviewed, reviewer):
    entry = services.promote_run(run=reviewed, actor=reviewer)
    text = entry.triple_text
    services.set_memory_status(entry=entry, status=MemoryEntry.Status.RETIRED, actor=reviewer)
    assert entry.pk not in [m.id for m in bank.retrieve(text, k=5)]
    event = audit_of("memory.retire", entry)
    assert (event.before, event.after, event.actor) == ({"status": "active"}, {"status": "retired"}, reviewer)
    services.set_memory_status(entry=entry, status=MemoryEntry.Status.ACTIVE, actor=reviewer)
    assert bank.retrieve(text, k=1)[0].id == entry.pk
    assert audit_of("memory.restore", entry).after == {"status": "active"}
    with pytest.raises(ValueError, match="unknown status"):
        services.set_memory_status(entry=entry, status="deleted", actor=reviewer)


def test_assign_changes_only_tasks_not_already_assigned_and_audits_each(light_kg, make_user):
    curator, other = make_user("curator", "cleo"), make_user("curator", "otto")
    first, second = make_task(light_kg), make_task(light_kg, "Q90", "P17", "Q142", assignee=other)
    third = make_task(light_kg, "Q25", "P131", "Q145", assignee=curator)
    changed = services.assign_tasks(tasks=VerificationTask.objects.filter(pk__in=[first.pk, second.pk, third.pk]),
                                    assignee=curator, actor=other)
    assert changed == 2
    assert set(VerificationTask.objects.filter(assignee=curator).values_list("pk", flat=True)) == {first.pk, second.pk, third.pk}
    assert audit_of("task.assign", first).before == {"assignee": None}
    event = audit_of("task.assign", second)
    assert (event.before, event.after, event.actor) == ({"assignee": other.pk}, {"assignee": curator.pk}, other)
    assert not AuditEvent.objects.filter(action="task.assign", object_id=str(third.pk)).exists()


def test_a_promoted_trajectory_leaves_a_loop_out(run, reviewer):
    from verifier.models import Step

    last = run.steps.order_by("-seq").first()
    action = run.steps.filter(kind="action").order_by("seq").first()
    observation = run.steps.filter(kind="observation").order_by("seq").first()
    Step.objects.filter(pk=last.pk).update(seq=last.seq + 10)
    Step.objects.create(run=run, seq=last.seq, kind="action", content=action.content, tool=action.tool)
    Step.objects.create(run=run, seq=last.seq + 1, kind="observation", content="You already ran this action.", tool=action.tool)
    text = bank.trajectory_of(run)
    assert text.count(f"Action: {action.content}") == 1 and "You already ran" not in text
    assert observation.content.strip()[:40] in text
    assert text.splitlines()[-2] == "(2 repeated steps left out)" and text.splitlines()[-1].startswith("Final Answer")


def test_a_benchmark_triple_of_an_evaluation_is_never_promoted(run, reviewer):
    from verifier.models import VerificationTask

    VerificationTask.objects.filter(pk=run.task_id).update(source="evaluation:codex-agent-100 (valid)")
    run.task.refresh_from_db()
    with pytest.raises(ReviewRejected, match="benchmark triple of an evaluation"):
        services.promote_run(run=run, actor=reviewer)
    assert not MemoryEntry.objects.filter(source_run=run).exists()


def test_an_unreviewed_run_is_not_promoted(run, reviewer):
    with pytest.raises(ReviewRejected, match="review run .* first"):
        services.promote_run(run=run, actor=reviewer)
    services.review_run(run=run, reviewer=reviewer, decision="comment", reason="looks fine")  # a comment is no review
    with pytest.raises(ReviewRejected, match="review run .* first"):
        services.promote_run(run=run, actor=reviewer)
    assert not MemoryEntry.objects.filter(source_run=run).exists()
