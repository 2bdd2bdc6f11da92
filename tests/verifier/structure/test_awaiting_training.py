"""A run waits only for a KG's first structural model while it trains: once any model is ready, a flagged triple — a fact the KG
states included — is scored at once, and importing facts never starts a training."""

import io
import re
from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from tests.verifier.structure.test_training import TINY, generated_kg
from verifier.agent.loop import AgentConfig
from verifier.models import Run, StructuralModel, VerificationTask
from verifier.redelivery import _waiting
from verifier.runner import execute_run
from verifier.selectors import structural_statuses
from verifier.services import import_flagged_triples, release_awaiting, start_run
from verifier.structure.training import request_training, train, training_to_await, wait_for_model

pytestmark = pytest.mark.django_db


@pytest.fixture
def towns(db):
    return generated_kg()


def _rows(kg, head, relation, tail):
    return (kg.entities.get(external_id=head).pk, kg.relations.get(external_id=relation).pk,
            kg.entities.get(external_id=tail).pk)


def _task(kg, rows):
    h, r, t = rows
    return VerificationTask.objects.create(kg=kg, head_id=h, relation_id=r, tail_id=t)


def _ready(kg):
    return StructuralModel.objects.create(kg=kg, kg_version=kg.version, status=StructuralModel.Status.READY, progress=1.0,
                                          finished_at=timezone.now(), heartbeat_at=timezone.now())


def test_only_the_first_model_in_training_is_waited_for(towns):
    kg, _ = towns
    assert training_to_await(kg) is None  # no model and none coming: verified without it (the tools say so)
    job = StructuralModel.objects.create(kg=kg, kg_version=kg.version, status=StructuralModel.Status.TRAINING,
                                         heartbeat_at=timezone.now())
    assert training_to_await(kg) == job
    StructuralModel.objects.filter(pk=job.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    assert training_to_await(kg) is None  # stalled: its worker is gone
    # Any ready model, of this version or of an earlier one while a changed KG's model trains: nothing to wait for.
    StructuralModel.objects.filter(pk=job.pk).update(heartbeat_at=timezone.now())
    _ready(kg)
    assert training_to_await(kg) is None


@pytest.mark.slow
def test_a_run_waiting_for_the_first_model_stays_queued_until_the_training_ends(towns, django_capture_on_commit_callbacks,
                                                                               client, make_user, shipped_weighing):
    kg, triples = towns
    job = request_training(kg, reason="KG loaded")
    rows = _rows(kg, *next(t for t in triples if t[1] == "citizen_of"))
    run = start_run(task=_task(kg, rows), config={"mode": "evidence"}, queue=False)
    execute_run(run.pk, llm=object())  # would fail loudly if it tried to call a model
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED and run.awaiting_model == job and not run.steps.exists()

    # Not lost: the sweep that sends again queued runs without a message leaves it to the training.
    Run.objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(minutes=10))
    assert run.pk not in _waiting(timezone.now())

    # The run page and the API say what it waits for, and it has no place in the workers' line.
    client.force_login(make_user("viewer"))
    page = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert f"Waits for the structural model of {kg.name} (waiting for a training worker)" in page
    assert re.search(r'id="queue-position"[^>]*hidden', page)
    assert client.get(f"/api/runs/{run.pk}/").json()["awaiting_model"]["id"] == job.pk
    assert "1 run waits for it" in structural_statuses([kg.pk])[0].text

    # The training ends: the run is sent again, and finds nothing left to wait for.
    StructuralModel.objects.filter(pk=job.pk).update(status=StructuralModel.Status.READY, progress=1.0)
    with django_capture_on_commit_callbacks(execute=False) as sent:
        assert release_awaiting(job.pk) == [run.pk]
    assert len(sent) == 1
    run.refresh_from_db()
    assert run.awaiting_model is None and run.status == Run.Status.QUEUED
    assert training_to_await(kg) is None


def test_only_runs_that_use_the_structure_wait():
    assert AgentConfig.from_dict({"mode": "evidence"}).uses_structure
    assert AgentConfig.from_dict({"mode": "agent"}).uses_structure
    assert not AgentConfig.from_dict({"mode": "agent", "structural_tools": False}).uses_structure
    assert not any(AgentConfig.from_dict({"mode": mode}).uses_structure for mode in ("zero-shot", "cot", "self-consistency"))


def test_importing_facts_the_kg_states_says_so_and_starts_no_training(towns, tmp_path, django_capture_on_commit_callbacks):
    kg, triples = towns
    _ready(kg)
    fact = next(t for t in triples if t[1] == "citizen_of")
    stated = set(triples)
    unstated = next(("P0", "born_in", city) for city in (f"T{i}" for i in range(32)) if ("P0", "born_in", city) not in stated)
    path = tmp_path / "flagged.tsv"
    path.write_text("\n".join("\t".join(t) for t in (fact, unstated)) + "\n")
    with django_capture_on_commit_callbacks(execute=True):
        report = import_flagged_triples(kg=kg, path=path)
    assert (report.created, report.stated) == (2, 1)
    assert not StructuralModel.objects.filter(kg=kg).in_flight().exists()


def test_a_command_waits_for_the_training_in_flight_then_takes_its_model(towns):
    kg, _ = towns
    job = StructuralModel.objects.create(kg=kg, kg_version=kg.version, status=StructuralModel.Status.TRAINING, progress=0.42,
                                         stage="training: network 1 of 5, epoch 7/300", heartbeat_at=timezone.now())
    lines: list[str] = []

    def log(line: str) -> None:
        lines.append(line)
        if len(lines) == 2:  # the worker finishes while the command waits
            StructuralModel.objects.filter(pk=job.pk).update(status=StructuralModel.Status.READY, progress=1.0)

    assert wait_for_model(kg, log=log, poll=0) == job
    assert lines == [f"Waiting for structural model #{job.pk} of {kg.name}, trained by a worker (progress also at /health/)…",
                     "  42% training: network 1 of 5, epoch 7/300"]


@pytest.mark.slow
def test_the_queue_row_of_a_waiting_run_says_what_it_waits_for(towns, client, make_user, shipped_weighing):
    kg, triples = towns
    request_training(kg, reason="KG loaded")
    rows = _rows(kg, *next(t for t in triples if t[1] == "citizen_of"))
    run = start_run(task=_task(kg, rows), config={"mode": "evidence"}, queue=False)
    execute_run(run.pk, llm=object())
    client.force_login(make_user("viewer"))
    page = client.get(reverse("queue")).content.decode()
    assert f'href="/runs/{run.pk}/">waiting for the structural model…</a>' in page


@pytest.mark.slow
def test_verify_scores_a_kg_fact_at_once_with_the_network_that_never_learnt_it(db):
    kg, triples = generated_kg()
    first = train(kg, config=TINY, folds=2)
    fact = next(t for t in triples if t[1] == "citizen_of")
    out = io.StringIO()
    call_command("verify", *fact, "--kg", kg.name, "--mode", "kge", stdout=out)
    printed = out.getvalue()
    run = Run.objects.get()
    assert run.status == Run.Status.SUCCEEDED and run.structural_model_id == first.pk and "Verdict:" in printed
    assert "Training" not in printed and StructuralModel.objects.filter(kg=kg).count() == 1


def test_a_retraining_keeps_the_settings_of_the_model_it_replaces(towns):
    kg, _ = towns
    ready = _ready(kg)
    StructuralModel.objects.filter(pk=ready.pk).update(config={"kge": {**TINY.to_dict(), "dim": 8}})
    job = request_training(kg, reason="KG changed")
    assert job.config["kge"]["dim"] == 8 and job.config["kge"]["max_epochs"] == TINY.max_epochs
    # Settings this version can no longer read (a setting since removed): the default, not a failed job.
    job.delete()
    StructuralModel.objects.filter(pk=ready.pk).update(config={"kge": {"dim": 8, "retired_setting": 1}})
    assert request_training(kg, reason="KG changed").config == {"kge": {}}


def test_the_import_page_says_how_many_facts_the_kg_states(towns, client, make_user):
    kg, triples = towns
    _ready(kg)
    fact = next(t for t in triples if t[1] == "citizen_of")
    client.force_login(make_user("curator"))
    upload = SimpleUploadedFile("flagged.tsv", ("\t".join(fact) + "\n").encode(), content_type="text/tab-separated-values")
    page = client.post(reverse("queue-import"), {"kg": kg.pk, "file": upload}, follow=True).content.decode()
    assert "1 triple(s) queued on towns from 1 row(s). 1 of them are facts the KG states." in page
