"""A run on a triple the structural model learnt waits for a model trained without it, instead of being judged
without its structural evidence; the training's end sends it again."""

import io
from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from tests.verifier.structure.test_training import TINY, generated_kg
from verifier.agent.loop import AgentConfig
from verifier.models import HeldOutTriple, Run, StructuralModel, VerificationTask
from verifier.redelivery import _waiting
from verifier.runner import execute_run, release_awaiting
from verifier.selectors import structural_statuses
from verifier.services import import_flagged_triples, start_run
from verifier.structure.scoring import trained_on
from verifier.structure.training import train, training_to_await, wait_for_model

pytestmark = pytest.mark.django_db


@pytest.fixture
def towns(db):
    kg, triples = generated_kg()
    ready = StructuralModel.objects.create(kg=kg, kg_version=kg.version, status=StructuralModel.Status.READY, progress=1.0,
                                           finished_at=timezone.now(), heartbeat_at=timezone.now())
    return kg, triples, ready


def _rows(kg, head, relation, tail):
    return (kg.entities.get(external_id=head).pk, kg.relations.get(external_id=relation).pk,
            kg.entities.get(external_id=tail).pk)


def _task(kg, rows):
    h, r, t = rows
    return VerificationTask.objects.create(kg=kg, head_id=h, relation_id=r, tail_id=t)


def test_a_learnt_triple_waits_for_one_training_without_it(towns):
    kg, triples, ready = towns
    learnt = _rows(kg, *next(t for t in triples if t[1] == "citizen_of"))
    since = timezone.now()
    job = training_to_await(kg, learnt, since=since)
    assert job is not None and job.status == StructuralModel.Status.QUEUED and job.pk != ready.pk
    assert "queued triple" in job.stage
    assert training_to_await(kg, learnt, since=since) == job  # the job in flight, not a second one

    # A triple the ready model held out, or one that is not a KG fact, has nothing to wait for.
    held = _rows(kg, *next(t for t in triples if t[1] == "born_in"))
    HeldOutTriple.objects.create(model=ready, head_id=held[0], relation_id=held[1], tail_id=held[2], reason="queued")
    assert training_to_await(kg, held, since=since) is None
    unstated = (learnt[0], learnt[1], _rows(kg, "P0", "born_in", "T0")[2])
    assert training_to_await(kg, unstated, since=since) is None

    # The attempt failed: the run starts without waiting again (and no job is requested over and over).
    StructuralModel.objects.filter(pk=job.pk).update(status=StructuralModel.Status.FAILED, error="out of memory")
    assert training_to_await(kg, learnt, since=since) is None
    # A run created after that failure gets its own attempt.
    again = training_to_await(kg, learnt, since=timezone.now() + timedelta(seconds=1))
    assert again is not None and again.status == StructuralModel.Status.QUEUED


def test_the_first_model_in_training_is_waited_for_and_a_stalled_job_is_not(towns):
    kg, triples, ready = towns
    ready.delete()
    rows = _rows(kg, *triples[0])
    assert training_to_await(kg, rows, since=timezone.now()) is None  # no model and none coming: the tool says so
    job = StructuralModel.objects.create(kg=kg, kg_version=kg.version, status=StructuralModel.Status.TRAINING,
                                         heartbeat_at=timezone.now())
    assert training_to_await(kg, rows, since=timezone.now()) == job
    StructuralModel.objects.filter(pk=job.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    assert training_to_await(kg, rows, since=timezone.now()) is None


def test_a_run_on_a_learnt_triple_stays_queued_until_the_training_ends(towns, django_capture_on_commit_callbacks, client,
                                                                       make_user, shipped_weighing):
    kg, triples, ready = towns
    rows = _rows(kg, *next(t for t in triples if t[1] == "citizen_of"))
    run = start_run(task=_task(kg, rows), config={"mode": "evidence"}, queue=False)
    execute_run(run.pk, llm=object())  # would fail loudly if it tried to call a model
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED and run.awaiting_model is not None and not run.steps.exists()
    job = run.awaiting_model

    # Not lost: the sweep that sends again queued runs without a message leaves it to the training.
    Run.objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(minutes=10))
    assert run.pk not in _waiting(timezone.now())

    # The run page and the API say what it waits for, and it has no place in the workers' line.
    client.force_login(make_user("viewer"))
    page = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert f"Waits for structural model #{job.pk} of {kg.name} (queued, 0%)" in page and 'id="queue-position"' not in page
    assert "Waiting for the structural model…" in page and "Investigating…" not in page
    assert client.get(f"/api/runs/{run.pk}/").json()["awaiting_model"]["id"] == job.pk
    # The status strip on every page counts the runs a training holds back.
    assert "queued (a queued triple was in the training set); 1 run(s) wait for it; serving the ready model" in \
        structural_statuses([kg.pk])[0].text

    # The training ends: the run is sent again, and finds nothing left to wait for.
    StructuralModel.objects.filter(pk=ready.pk).update(status=StructuralModel.Status.SUPERSEDED)
    StructuralModel.objects.filter(pk=job.pk).update(status=StructuralModel.Status.READY, progress=1.0)
    HeldOutTriple.objects.create(model=job, head_id=rows[0], relation_id=rows[1], tail_id=rows[2], reason="queued")
    with django_capture_on_commit_callbacks(execute=False) as sent:
        assert release_awaiting(job.pk) == [run.pk]
    assert len(sent) == 1
    run.refresh_from_db()
    assert run.awaiting_model is None and run.status == Run.Status.QUEUED
    assert training_to_await(kg, rows, since=run.created_at) is None


def test_only_runs_that_use_the_structure_wait():
    assert AgentConfig.from_dict({"mode": "evidence"}).uses_structure
    assert AgentConfig.from_dict({"mode": "agent"}).uses_structure
    assert not AgentConfig.from_dict({"mode": "agent", "structural_tools": False}).uses_structure
    assert not any(AgentConfig.from_dict({"mode": mode}).uses_structure for mode in ("zero-shot", "cot", "self-consistency"))


def test_importing_facts_the_model_learnt_says_so_and_requests_the_training(towns, tmp_path,
                                                                            django_capture_on_commit_callbacks):
    kg, triples, _ = towns
    fact = next(t for t in triples if t[1] == "citizen_of")
    stated = set(triples)
    unstated = next(("P0", "born_in", city) for city in (f"T{i}" for i in range(32)) if ("P0", "born_in", city) not in stated)
    path = tmp_path / "flagged.tsv"
    path.write_text("\n".join("\t".join(t) for t in (fact, unstated)) + "\n")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        report = import_flagged_triples(kg=kg, path=path)
    assert (report.created, report.learnt) == (2, 1)
    assert not StructuralModel.objects.filter(kg=kg, status=StructuralModel.Status.QUEUED).exists()  # not before commit
    for callback in callbacks:
        callback()
    job = StructuralModel.objects.get(kg=kg, status=StructuralModel.Status.QUEUED)
    assert "1 newly queued triple(s) were in the training set" in job.stage


def test_a_command_waits_for_the_training_in_flight_then_takes_the_model_without_the_triple(towns):
    kg, triples, ready = towns
    rows = _rows(kg, *next(t for t in triples if t[1] == "citizen_of"))
    _task(kg, rows)
    job = StructuralModel.objects.create(kg=kg, kg_version=kg.version, status=StructuralModel.Status.TRAINING, progress=0.42,
                                         stage="training: epoch 7/300", heartbeat_at=timezone.now())
    lines: list[str] = []

    def log(line: str) -> None:
        lines.append(line)
        if len(lines) == 2:  # the worker finishes while the command waits: a model trained without the triple
            StructuralModel.objects.filter(pk=ready.pk).update(status=StructuralModel.Status.SUPERSEDED)
            StructuralModel.objects.filter(pk=job.pk).update(status=StructuralModel.Status.READY, progress=1.0)
            HeldOutTriple.objects.create(model=job, head_id=rows[0], relation_id=rows[1], tail_id=rows[2], reason="queued")

    assert wait_for_model(kg, triple=rows, log=log, poll=0) == job
    assert lines == [f"Waiting for structural model #{job.pk} of {kg.name}, trained by a worker (progress also at /health/)…",
                     "  42% training: epoch 7/300"]


def test_the_queue_row_of_a_waiting_run_says_what_it_waits_for(towns, client, make_user, shipped_weighing):
    kg, triples, _ = towns
    rows = _rows(kg, *next(t for t in triples if t[1] == "citizen_of"))
    run = start_run(task=_task(kg, rows), config={"mode": "evidence"}, queue=False)
    execute_run(run.pk, llm=object())
    client.force_login(make_user("viewer"))
    page = client.get(reverse("queue")).content.decode()
    assert f'href="/runs/{run.pk}/">waiting for the structural model…</a>' in page


def test_verify_trains_a_model_without_a_learnt_fact_before_it_verifies_it(db):
    kg, triples = generated_kg()
    first = train(kg, config=TINY)
    fact = next(t for t in triples if t[1] == "citizen_of" and trained_on(first, *_rows(kg, *t)))
    out = io.StringIO()
    call_command("verify", *fact, "--kg", kg.name, "--mode", "kge", stdout=out)
    printed = out.getvalue()
    assert printed.startswith(f"Verifying Person {fact[0]} — citizen of — Country {fact[2]} ({', '.join(fact)}) on towns:\n"
                              "Training the structural model of towns without this triple, which the ready one learnt, here")
    run = Run.objects.get()
    assert run.status == Run.Status.SUCCEEDED and run.structural_model_id not in (None, first.pk)
    assert not trained_on(run.structural_model, *_rows(kg, *fact)) and "Verdict:" in printed


def test_a_retraining_keeps_the_settings_of_the_model_it_replaces(towns):
    kg, triples, ready = towns
    rows = _rows(kg, *next(t for t in triples if t[1] == "citizen_of"))
    StructuralModel.objects.filter(pk=ready.pk).update(config={"kge": {**TINY.to_dict(), "dim": 8}})
    job = training_to_await(kg, rows, since=timezone.now())
    assert job.config["kge"]["dim"] == 8 and job.config["kge"]["max_epochs"] == TINY.max_epochs
    # Settings this version can no longer read (a setting since removed): the default, not a failed job.
    job.delete()
    StructuralModel.objects.filter(pk=ready.pk).update(config={"kge": {"dim": 8, "retired_setting": 1}})
    assert training_to_await(kg, rows, since=timezone.now()).config == {"kge": {}}


def test_the_import_page_says_the_learnt_facts_wait_and_for_about_how_long(towns, client, make_user):
    kg, triples, ready = towns
    StructuralModel.objects.filter(pk=ready.pk).update(started_at=timezone.now() - timedelta(minutes=5),
                                                       finished_at=timezone.now())
    fact = next(t for t in triples if t[1] == "citizen_of")
    client.force_login(make_user("curator"))
    upload = SimpleUploadedFile("flagged.tsv", ("\t".join(fact) + "\n").encode(), content_type="text/tab-separated-values")
    page = client.post(reverse("queue-import"), {"kg": kg.pk, "file": upload}, follow=True).content.decode()
    assert ("1 triple(s) queued on towns from 1 row(s). 1 are facts the structural model was trained with: a model "
            "trained without them is being made (about 5 minutes last time; the status strip shows how far), and their "
            "runs wait for it.") in page
