"""Health of the services KGV depends on: database, pgvector, Redis, Celery workers and the model endpoint, the
depth of the run queue, and the state of each local KG's structural model (its training job can die with its
worker; nothing else would say so)."""

from __future__ import annotations

import contextlib
import time
from dataclasses import asdict, dataclass

import redis
import requests
from django.conf import settings
from django.core.cache import cache
from django.db import connection
from django.db.models import Count

from kgv_web.celery import app as celery_app
from verifier.models import Run
from verifier.selectors import structural_statuses
from verifier.wiring import llm_endpoint

MODEL_TIMEOUT_SECONDS = 3
STATUS_CACHE_KEY, STATUS_CACHE_SECONDS = "workbench-status:model", 15


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    ms: float


def _timed(name: str, probe) -> Check:
    started = time.perf_counter()
    try:
        ok, detail = probe()
    except Exception as exc:  # a health check reports failures, it never raises
        ok, detail = False, f"{type(exc).__name__}: {exc}"
    return Check(name, ok, detail, round((time.perf_counter() - started) * 1000, 1))


def _database() -> tuple[bool, str]:
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        return True, f"PostgreSQL {cursor.fetchone()[0]}"


def _pgvector() -> tuple[bool, str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        row = cursor.fetchone()
    return (True, f"pgvector {row[0]}") if row else (False, "the vector extension is not installed (run migrate)")


def _redis() -> tuple[bool, str]:
    client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
    try:
        info = client.info("server")
        return True, f"Redis {info['redis_version']}"
    finally:
        client.close()


def _workers() -> tuple[bool, str]:
    replies = celery_app.control.ping(timeout=1.0) or []
    names = sorted(name for reply in replies for name in reply)
    return (True, f"{len(names)} worker(s): {', '.join(names)}") if names else (False, "no Celery worker answered")


def _model_state() -> tuple[str, str]:
    """The OpenAI-compatible endpoint the workers' runs call: ``up`` when it answers ``GET /models``; ``busy`` when
    it accepts the connection but does not answer in time while runs are being investigated (a server computing
    on every core, as the embedded model does, answers nothing else until it is done); otherwise ``down``."""
    base_url, model = llm_endpoint()
    if not base_url:
        return "down", "no model endpoint: set LLM_BASE_URL, or start the embedded local model (make demo)"
    try:
        response = requests.get(base_url.rstrip("/") + "/models", timeout=MODEL_TIMEOUT_SECONDS,
                                headers={"Authorization": f"Bearer {settings.LLM_API_KEY}"})
    except requests.ReadTimeout:
        running = _queue_depth()[1]
        if not running:
            raise
        return "busy", (f"{model} at {base_url} is busy: connected, but no answer to GET /models within "
                        f"{MODEL_TIMEOUT_SECONDS} s while {running} run(s) are being investigated")
    if not response.ok:
        return "down", f"{base_url} answered {response.status_code} to GET /models"
    served = [str(item.get("id")) for item in (response.json().get("data") or []) if isinstance(item, dict)]
    return "up", f"{model} at {base_url} (serving {', '.join(served) or 'no model listed'})"


def _model() -> tuple[bool, str]:
    """The model check of the report: healthy when it answers or is busy with our runs."""
    state, detail = _model_state()
    return state != "down", detail


def _queue_depth() -> tuple[int, int]:
    """(runs waiting for a worker, runs being investigated)."""
    counts = dict(Run.objects.in_flight().values_list("status").annotate(n=Count("id")).values_list("status", "n"))
    return counts.get(Run.Status.QUEUED, 0), counts.get(Run.Status.RUNNING, 0)


def _queue() -> tuple[bool, str]:
    """How many runs wait for a worker and how many are being investigated (information, never unhealthy)."""
    queued, running = _queue_depth()
    return True, f"{queued} run(s) queued, {running} running"


def _structural_models() -> tuple[bool, str]:
    """Per local KG, its structural model: "codex-s: training 45% (epoch 40/300, …)". Not trained yet or
    still training is fine (the tools say so); a failed or stalled job with no ready model is not."""
    statuses = structural_statuses()
    if not statuses:
        return True, "no local KG loaded"
    return all(s.ok for s in statuses), "; ".join(f"{s.kg}: {s.text}" for s in statuses)


def check_all() -> dict:
    checks = [
        _timed("database", _database),
        _timed("pgvector", _pgvector),
        _timed("redis", _redis),
        _timed("worker", _workers),
        _timed("model", _model),
        _timed("run queue", _queue),
        _timed("structural models", _structural_models),
    ]
    return {"ok": all(c.ok for c in checks), "checks": [asdict(c) for c in checks]}


def workbench_status() -> dict:
    """What the page header shows every signed-in user: whether the model the runs call answers (``state``: up,
    busy with runs, down), and the run queue's depth. Every open page polls it, so the model probe's answer is
    shared for STATUS_CACHE_SECONDS; why a model does not answer (its address, the error) stays in the
    administrators' report."""
    try:
        model = cache.get(STATUS_CACHE_KEY)
    except redis.RedisError:  # the cache is down (the header then probes each time; the report names it)
        model = None
    if model is None:
        try:
            state = _model_state()[0]
        except Exception:  # noqa: BLE001 — not answering is the answer; the administrators' report says why
            state = "down"
        model = {"ok": state != "down", "state": state, "name": llm_endpoint()[1] or "none configured"}
        with contextlib.suppress(redis.RedisError):
            cache.set(STATUS_CACHE_KEY, model, STATUS_CACHE_SECONDS)
    queued, running = _queue_depth()
    return {"model": model, "queued": queued, "running": running}


def liveness() -> dict:
    """What anyone may ask (load balancers): is the web process up and its database reachable. Cheap, and
    it names no version, host or error."""
    try:
        ok, _ = _database()
    except Exception:  # noqa: BLE001 — down is the answer, the reason is for administrators
        ok = False
    return {"ok": ok, "checks": [], "detail": "sign in as an administrator for the full report"}
