"""Evaluations started from the workbench: an admin draws a dataset benchmark, the real worker drives it (its runs go
to the worker's other threads), Stop halts it between runs, Resume verifies the rest."""

from __future__ import annotations

import re

import pytest
from celery.result import AsyncResult
from django.urls import reverse

from tests.verifier.web.workbench import client_for, fast_password_hashing, signed_in  # noqa: F401  (autouse fixture)
from tests.workers import wait_for
from verifier.models import AuditEvent, Evaluation, Run


@pytest.mark.django_db
def test_the_start_form_offers_the_benchmarks_that_can_be_drawn_here_and_only_to_admins(codex_like, make_user):
    page = client_for(make_user, "admin").get(reverse("evaluations:list")).content.decode()
    assert '<option value="codex-s">codex-s</option>' in page and "fb15k-237" not in page
    assert "Start an evaluation" not in client_for(make_user, "reviewer").get(reverse("evaluations:list")).content.decode()
    assert client_for(make_user, "reviewer").post(reverse("evaluations:start"), {"benchmark": "codex-s"}).status_code == 403


@pytest.mark.django_db
def test_a_start_the_form_refuses_says_why_and_draws_nothing(codex_like, make_user):
    client = client_for(make_user, "admin")
    response = client.post(reverse("evaluations:start"), {"benchmark": "fb15k-237", "mode": "kge", "n": 5000, "seed": 0})
    page = client.get(response["Location"]).content.decode()
    assert "No evaluation started: Benchmark: Select a valid choice. fb15k-237 is not one of the available choices." in page
    assert "No evaluation started: Triples: Ensure this value is less than or equal to 2000." in page
    assert not Evaluation.objects.exists()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_an_evaluation_started_in_the_browser_is_driven_by_the_worker_stopped_and_resumed(codex_like, make_user,
                                                                                         celery_worker_process):
    admin = make_user("admin", "ada")
    client = signed_in(admin)
    response = client.post(reverse("evaluations:start"), {"benchmark": "codex-s", "mode": "agent", "n": 4, "seed": 0})
    page = client.get(response["Location"]).content.decode()
    assert Evaluation.objects.exists(), re.findall(r'<li class="[^"]*">([^<]*)</li>', page)  # what the page said
    evaluation = Evaluation.objects.get()
    assert response["Location"] == reverse("evaluations:detail", args=[evaluation.pk])
    assert f"Evaluation {evaluation.name} is with the worker: 4 verification(s)" in page

    def finished_runs():
        return Run.objects.filter(evaluation_items__evaluation=evaluation, status=Run.Status.SUCCEEDED).count()

    wait_for(lambda: finished_runs() >= 1, what="the worker verifying the first triple")
    listed = client.get(reverse("evaluations:list")).content.decode()
    assert re.search(r'Running <span class="muted progress">\([1-4] of 4\)</span>', listed)
    client.post(reverse("evaluations:stop", args=[evaluation.pk]))
    wait_for(lambda: not Run.objects.filter(evaluation_items__evaluation=evaluation).in_flight().exists(),
             what="the run under way at the stop to end")
    stopped_at = finished_runs()
    evaluation.refresh_from_db()
    assert evaluation.status == Evaluation.Status.INTERRUPTED and stopped_at < 4  # no run was started after the stop
    page = client.get(reverse("evaluations:detail", args=[evaluation.pk])).content.decode()
    assert 'id="interrupted"' in page and ">Resume</button>" in page

    client.post(reverse("evaluations:resume", args=[evaluation.pk]))
    wait_for(lambda: Evaluation.objects.get(pk=evaluation.pk).status == Evaluation.Status.FINISHED, timeout=120,
             what="the resumed evaluation to finish")
    evaluation.refresh_from_db()
    assert evaluation.metrics["n"] == 4 and finished_runs() == 4
    assert [e.action for e in AuditEvent.objects.filter(object_type="verifier.evaluation").order_by("pk")] == [
        "evaluation.create", "evaluation.start", "evaluation.stop", "evaluation.resume"]


@pytest.mark.django_db
def test_an_evaluation_waiting_its_turn_shows_no_figures_and_stop_takes_it_back(codex_like, make_user):
    client = client_for(make_user, "admin")
    response = client.post(reverse("evaluations:start"), {"benchmark": "codex-s", "mode": "kge", "n": 4, "seed": 0})
    page = client.get(response["Location"]).content.decode()  # not driven: the worker is handed it at commit
    assert "<tr><th>Accuracy</th><td class=\"num\">–</td></tr>" in page
    assert 'id="waiting"' in page and ">Stop</button>" in page and ">Resume</button>" not in page
    assert "Waiting its turn" in client.get(reverse("evaluations:list")).content.decode()
    evaluation = Evaluation.objects.get()
    assert evaluation.status == Evaluation.Status.CREATED and evaluation.worker_driver

    page = client.get(client.post(reverse("evaluations:stop", args=[evaluation.pk]))["Location"]).content.decode()
    assert "was waiting its turn with the worker; the worker will not drive it" in page
    assert ">Resume</button>" in page and 'id="waiting"' not in page
    evaluation.refresh_from_db()
    assert evaluation.status == Evaluation.Status.CREATED and not evaluation.worker_driver


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_second_evaluation_waits_for_the_first_rather_than_take_the_last_worker_process(codex_like, make_user,
                                                                                        celery_worker_process):
    """A driver holds a worker process for the evaluation's length: two at once on a two-process worker would leave
    none for their runs. The second waits its turn, then runs."""
    client = signed_in(make_user("admin"))
    for mode in ("agent", "zero-shot", "cot"):
        client.post(reverse("evaluations:start"), {"benchmark": "codex-s", "mode": mode, "n": 4, "seed": 0})
    first, second, third = Evaluation.objects.order_by("pk")
    wait_for(lambda: Evaluation.objects.get(pk=first.pk).status == Evaluation.Status.RUNNING, what="the first driven")
    # The third is stopped while it waits: its driver, when its turn comes, drives nothing.
    third_driver = Evaluation.objects.get(pk=third.pk).worker_driver
    client.post(reverse("evaluations:stop", args=[third.pk]))
    seen = []
    wait_for(lambda: seen.append(Evaluation.objects.get(pk=second.pk).status) or
             Evaluation.objects.get(pk=first.pk).status == Evaluation.Status.FINISHED, timeout=120, what="the first to finish")
    assert set(seen) == {Evaluation.Status.CREATED}  # not driven while the first was
    wait_for(lambda: Evaluation.objects.get(pk=second.pk).status == Evaluation.Status.FINISHED, timeout=120,
             what="the second, in its turn")
    assert AsyncResult(third_driver).get(timeout=60) == "withdrawn"
    third.refresh_from_db()
    assert third.status == Evaluation.Status.CREATED and not third.items.filter(run__isnull=False).exists()
    assert Evaluation.objects.filter(worker_driver="").count() == 3  # each driver cleared its mark on its way out
