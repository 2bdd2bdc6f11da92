from datetime import timedelta

import pytest
from django.core.cache import cache
from django.test import Client

from tests.verifier.web.run_pages import make_world
from tests.verifier.web.structure_rows import failed, local_kg, ready, training
from verifier import health
from verifier.models import KnowledgeGraph, Run
from verifier.roles import set_role
from verifier.selectors import structural_statuses

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def model_endpoint(scripted_model, monkeypatch):
    """The endpoint the workers' runs call (the scripted OpenAI-compatible server), as make demo sets it."""
    monkeypatch.setattr("django.conf.settings.LLM_BASE_URL", scripted_model.url)
    return scripted_model.url


def _staff() -> Client:
    from django.contrib.auth import get_user_model

    client = Client()
    client.force_login(get_user_model().objects.create_user(f"operator-{get_user_model().objects.count()}", is_staff=True))
    return client


def test_anyone_gets_a_cheap_liveness_answer_that_discloses_nothing():
    response = Client().get("/health/")
    assert response.status_code == 200
    body = response.json()
    assert body["ok"] is True and body["checks"] == [] and "administrator" in body["detail"]
    assert "PostgreSQL" not in response.content.decode()


def _checks(response):
    return {c["name"]: c for c in response.json()["checks"]}


@pytest.mark.slow
def test_health_reports_database_pgvector_redis_and_a_live_worker(celery_worker_process):
    response = _staff().get("/health/")
    checks = _checks(response)
    assert response.status_code == 200, checks
    assert checks["database"]["ok"] and checks["database"]["detail"].startswith("PostgreSQL 18")
    assert checks["pgvector"]["ok"] and checks["pgvector"]["detail"].startswith("pgvector 0.8")
    assert checks["redis"]["ok"]
    assert checks["worker"]["ok"] and celery_worker_process in checks["worker"]["detail"]
    assert checks["model"]["ok"] and checks["model"]["detail"].startswith("scripted at http://127.0.0.1:")
    assert checks["run queue"]["ok"] and checks["run queue"]["detail"] == "0 run(s) queued, 0 running"


@pytest.mark.slow
def test_a_dead_model_endpoint_makes_the_service_unhealthy_and_says_where(celery_worker_process, monkeypatch):
    from tests.http_fixtures import refused_url

    dead = refused_url() + "/v1"
    monkeypatch.setattr("django.conf.settings.LLM_BASE_URL", dead)
    response = _staff().get("/health/")
    model = _checks(response)["model"]
    assert response.status_code == 503 and not model["ok"] and "ConnectionError" in model["detail"]
    monkeypatch.setattr("django.conf.settings.LLM_BASE_URL", "")
    assert "no model endpoint" in _checks(_staff().get("/health/"))["model"]["detail"]


def _curator(role: str | None = "curator") -> Client:
    from django.contrib.auth import get_user_model

    client = Client()
    user = get_user_model().objects.create_user(f"curator-{get_user_model().objects.count()}")
    set_role(user, role)
    client.force_login(user)
    return client


@pytest.fixture
def fresh_status():
    cache.delete(health.STATUS_CACHE_KEY)
    yield
    cache.delete(health.STATUS_CACHE_KEY)


@pytest.mark.slow
def test_the_header_status_tells_a_signed_in_user_the_model_and_the_queue_depth_and_nobody_else(fresh_status, monkeypatch):
    world = make_world()
    statuses = (Run.Status.QUEUED, Run.Status.QUEUED, Run.Status.RUNNING, Run.Status.SUCCEEDED)
    for tail, status in zip(("Q145", "Q350", "Q142", "Q42"), statuses, strict=True):
        Run.objects.create(task=world.task(tail=tail), status=status)
    assert Client().get("/health/status/").status_code == 403
    no_role = _curator(role=None).get("/health/status/")  # signed in, but without a role: like every page
    assert no_role.status_code == 403 and no_role.json()["error"]["message"] == "this needs the viewer role"
    response = _curator().get("/health/status/")
    assert response.status_code == 200
    body = response.json()
    assert body.pop("waiting").startswith("2 ")  # why they wait (test_the_waiting_reason_… below)
    assert body == {"model": {"ok": True, "state": "up", "name": "local"}, "queued": 2, "running": 1}

    # The model's answer is shared for a few seconds by every open page; why a model is down stays with admins.
    from tests.http_fixtures import refused_url

    monkeypatch.setattr("django.conf.settings.LLM_BASE_URL", refused_url() + "/v1")
    assert _curator().get("/health/status/").json()["model"]["ok"] is True  # still the cached answer
    cache.delete(health.STATUS_CACHE_KEY)
    body = _curator().get("/health/status/").content.decode()
    assert '"ok": false' in body and "127.0.0.1" not in body and "Error" not in body


@pytest.mark.slow
def test_a_model_that_takes_the_connection_but_answers_late_is_busy_not_down(fresh_status, monkeypatch):
    """The embedded model computing on every core answers no other request until it is done: it is busy (healthy,
    amber in the header), not down; a model that refuses the connection is down."""
    from tests.http_fixtures import LocalHTTPServer, refused_url

    monkeypatch.setattr(health, "MODEL_TIMEOUT_SECONDS", 0.3)
    with LocalHTTPServer() as server:
        server.route("/v1/models", {"data": [{"id": "local"}]})
        monkeypatch.setattr("django.conf.settings.LLM_BASE_URL", server.url + "/v1")
        server.delay_next(2, times=4)
        assert _curator().get("/health/status/").json()["model"] == {"ok": True, "state": "busy", "name": "local"}
        response = _staff().get("/health/")
        model = _checks(response)["model"]
        assert model["ok"] and "is busy: connected, but no answer to GET /models within 0.3 s" in model["detail"]
    monkeypatch.setattr("django.conf.settings.LLM_BASE_URL", refused_url() + "/v1")
    cache.delete(health.STATUS_CACHE_KEY)
    assert _curator().get("/health/status/").json()["model"] == {"ok": False, "state": "down", "name": "local"}


def test_the_waiting_reason_says_what_holds_queued_runs(fresh_status):
    world = make_world()
    queued = Run.objects.create(task=world.task(tail="Q145"), status=Run.Status.QUEUED)
    running = [Run.objects.create(task=world.task(tail=tail), status=Run.Status.RUNNING) for tail in ("Q350", "Q142")]
    assert health.waiting_reason(health.queue_depth(), health.QueueWorkers(0, 0, 0)) == "1 wait because no verification worker is running"
    assert health.waiting_reason(health.queue_depth(), health.QueueWorkers(1, 4, 1)) == "1 are being handed to a verification worker"
    # The workers' answer may be seconds old: the runs the database knows to be running count at once.
    assert health.waiting_reason(health.queue_depth(), health.QueueWorkers(1, 2, 0)) == "1 wait: all 2 verification slots are busy"
    # A worker whose slots also serve trainings: a training holding a slot is named.
    assert health.waiting_reason(health.queue_depth(), health.QueueWorkers(1, 3, 3, elsewhere=1)) == (
        "1 wait: all 3 verification slots are busy (1 with other work, such as a training)")
    Run.objects.filter(pk__in=[r.pk for r in running]).delete()
    job = training(local_kg("codex-s"))
    Run.objects.filter(pk=queued.pk).update(awaiting_model=job)
    assert health.waiting_reason(health.queue_depth(), health.QueueWorkers(1, 4, 0)) == (
        "1 wait for their KG's first structural model to finish training")


@pytest.mark.slow
def test_health_page_renders_for_browsers(celery_worker_process):
    response = _staff().get("/health/", HTTP_ACCEPT="text/html")
    assert response.status_code == 200
    assert b"all services up" in response.content


def test_home_requires_sign_in():
    response = Client().get("/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


# ---- structural models ---------------------------------------------------------------------------------

def _structural(response) -> dict:
    return _checks(response)["structural models"]


@pytest.mark.slow
def test_a_kg_without_a_structural_model_is_healthy_and_tells_the_administrator_how_to_train_one(celery_worker_process):
    local_kg("codex-s")
    KnowledgeGraph.objects.create(name="wikidata", kind=KnowledgeGraph.Kind.SPARQL, version=3)  # remote: no model to have
    KnowledgeGraph.objects.create(name="empty")  # nothing loaded yet (version 0)
    response = _staff().get("/health/")
    check = _structural(response)
    assert response.status_code == 200, _checks(response)
    assert check["ok"] and check["detail"] == "codex-s: not trained yet (to train it: manage.py train_kge codex-s)"


@pytest.mark.slow
def test_a_model_in_training_shows_its_progress_and_stays_healthy(celery_worker_process):
    training(local_kg("codex-s"))
    response = _staff().get("/health/")
    check = _structural(response)
    assert response.status_code == 200
    assert check["ok"] and check["detail"] == "codex-s: training (45%) — training: epoch 40/300, held-out MRR 0.351"


@pytest.mark.slow
def test_a_ready_model_names_its_kind_and_validation_mrr(celery_worker_process):
    kg = local_kg("codex-s", version=2)
    ready(kg, mrr=0.2, version=1)  # of the previous version: no longer counts
    ready(kg)
    check = _structural(_staff().get("/health/"))
    assert check["ok"] and check["detail"] == "codex-s: ready (ranks unseen facts well: 0.43) — ComplEx, held-out MRR 0.430"
    # A KG with its own validation split reports the figure the benchmarks and docs quote.
    newest = ready(kg)
    newest.metrics = {**newest.metrics, "dataset_validation": {"mrr": 0.383, "hits_at_10": 0.622}}
    newest.save(update_fields=["metrics"])
    check = _structural(_staff().get("/health/"))
    assert check["detail"] == "codex-s: ready (ranks unseen facts well: 0.38) — ComplEx, validation MRR 0.383"


@pytest.mark.slow
def test_a_failed_model_with_nothing_ready_degrades_health_with_the_error(celery_worker_process):
    failed(local_kg("codex-s"))
    response = _staff().get("/health/")
    check = _structural(response)
    assert response.status_code == 503 and not check["ok"]
    assert check["detail"] == ("codex-s: its training failed — RuntimeError: CUDA out of memory "
                               "(to train it: manage.py train_kge codex-s)")


@pytest.mark.slow
def test_a_stalled_job_degrades_health_unless_a_ready_model_still_serves(celery_worker_process):
    kg = local_kg("codex-s")
    training(kg, beat_ago=timedelta(minutes=12))
    check = _structural(_staff().get("/health/"))
    assert not check["ok"] and check["detail"].startswith("codex-s: its training stopped (no sign of life since ")
    assert "manage.py train_kge codex-s" in check["detail"]

    serving = ready(kg)
    training(kg, beat_ago=timedelta(minutes=12))  # the retraining job after it died too
    check = _structural(_staff().get("/health/"))
    assert check["ok"] and "; meanwhile the previous model scores facts (ranks unseen facts well: 0.43)" in check["detail"]
    assert check["detail"].endswith(f"; serving model #{serving.pk}: ComplEx, held-out MRR 0.430 "
                                    "(to train it: manage.py train_kge codex-s)")


def test_a_failed_retraining_next_to_a_ready_model_stays_healthy():
    kg = local_kg("codex-s")
    ready(kg)
    failed(kg)
    [status] = structural_statuses()
    assert status.ok and status.state == "failed" and "meanwhile the previous model scores facts" in status.text


def test_the_structural_check_reads_every_kg_in_two_queries(django_assert_max_num_queries):
    for name in ("codex-s", "fb15k-237", "mini"):
        kg = local_kg(name)
        ready(kg)
        training(kg)
    with django_assert_max_num_queries(2):
        statuses = structural_statuses()
    assert [(s.kg, s.state, s.percent) for s in statuses] == [("codex-s", "training", 45), ("fb15k-237", "training", 45),
                                                              ("mini", "training", 45)]


@pytest.mark.slow
def test_health_page_lists_the_structural_models(celery_worker_process):
    training(local_kg("codex-s"))
    page = _staff().get("/health/", HTTP_ACCEPT="text/html").content.decode()
    assert "structural models" in page and "codex-s: training (45%) — training: epoch 40/300, held-out MRR 0.351" in page
