"""Health of the services KGV depends on: database, pgvector, Redis, the Celery workers of each queue and the
model endpoint, the runs waiting and why, and the state of each local KG's structural model (its training job can
die with its worker; nothing else would say so)."""

from __future__ import annotations

import contextlib
import time
from dataclasses import asdict, dataclass

import redis
import requests
from django.conf import settings
from django.core.cache import cache
from django.db import connection
from django.db.models import Count, Q

from kgv_web.celery import app as celery_app
from verifier.models import Run
from verifier.queueing import RUN_VERIFICATION, queue_of
from verifier.selectors import QueuePlace, awaited_training, structural_statuses
from verifier.wiring import llm_endpoint

MODEL_TIMEOUT_SECONDS = 3
INSPECT_TIMEOUT_SECONDS = 1.0
STATUS_CACHE_KEY, STATUS_CACHE_SECONDS = "workbench-status:model", 15
WORKERS_CACHE_KEY = "workbench-status:workers"


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


@dataclass
class QueueWorkers:
    workers: int  # workers consuming the queue
    slots: int  # tasks they can run at once
    busy: int  # tasks they are running (of any queue: a worker's slots serve every queue it consumes)
    elsewhere: int = 0  # of those, tasks of other queues (a training holding a slot runs need)
    names: tuple[str, ...] = ()  # the workers' host names


def queue_workers() -> dict[str, QueueWorkers]:
    """Per queue of KGV_QUEUES: the workers consuming it, their slots and how many are busy (what the workers answer
    within INSPECT_TIMEOUT_SECONDS; a worker that does not answer counts for nothing)."""
    names = [name for reply in (celery_app.control.ping(timeout=INSPECT_TIMEOUT_SECONDS) or []) for name in reply]
    out = {queue: QueueWorkers(0, 0, 0) for queue in settings.KGV_QUEUES}
    if not names:
        return out
    inspector = celery_app.control.inspect(destination=names, timeout=INSPECT_TIMEOUT_SECONDS, limit=len(names))
    queues, stats, active = inspector.active_queues() or {}, inspector.stats() or {}, inspector.active() or {}
    for worker, consumed in queues.items():
        slots = int(((stats.get(worker) or {}).get("pool") or {}).get("max-concurrency") or 1)
        running = [(task.get("delivery_info") or {}).get("routing_key") for task in active.get(worker) or []]
        for queue in {q.get("name") for q in consumed} & set(out):
            entry = out[queue]
            entry.workers += 1
            entry.slots += slots
            entry.busy += len(running)
            entry.elsewhere += sum(1 for key in running if key != queue)
            entry.names = (*entry.names, worker)
    return out


def _workers() -> tuple[bool, str]:
    """Each queue's workers; unhealthy when a queue has none (its work would wait for ever)."""
    by_queue = queue_workers()
    missing = [queue for queue, workers in by_queue.items() if not workers.workers]
    text = "; ".join(f"{queue}: {', '.join(w.names)}, {w.busy} of {w.slots} slot(s) busy" if w.workers
                     else f"{queue}: no worker" for queue, w in by_queue.items())
    return not missing, text


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
    except requests.ReadTimeout:  # it took the connection: computing (a model serving one call at a time), not down
        return "busy", (f"{model} at {base_url} is busy: connected, but no answer to GET /models within "
                        f"{MODEL_TIMEOUT_SECONDS} s while it computes")
    if not response.ok:
        return "down", f"{base_url} answered {response.status_code} to GET /models"
    served = [str(item.get("id")) for item in (response.json().get("data") or []) if isinstance(item, dict)]
    return "up", f"{model} at {base_url} (serving {', '.join(served) or 'no model listed'})"


def _model() -> tuple[bool, str]:
    """The model check of the report: healthy when it answers or is busy with our runs."""
    state, detail = _model_state()
    return state != "down", detail


@dataclass(frozen=True)
class QueueDepth:
    """The runs in flight: waiting for a worker (of them, parked until their KG's first structural model is ready)
    and being investigated."""

    queued: int
    running: int
    awaiting_model: int = 0


def queue_depth() -> QueueDepth:
    """The run queue's depth, in one query."""
    queued = Q(status=Run.Status.QUEUED)
    return QueueDepth(**Run.objects.in_flight().aggregate(
        queued=Count("id", filter=queued), running=Count("id", filter=Q(status=Run.Status.RUNNING)),
        awaiting_model=Count("id", filter=queued & Q(awaiting_model__isnull=False))))


def _slots_text(workers: QueueWorkers, running: int) -> str:
    """"all 4 verification slots are busy (1 with a training)", or "" when one is free. The workers' answer is up to
    STATUS_CACHE_SECONDS old; the runs the database knows to be running count at once."""
    busy, elsewhere = min(workers.slots, max(workers.busy, running + workers.elsewhere)), workers.elsewhere
    if busy < workers.slots:
        return ""
    other = f" ({elsewhere} with other work, such as a training)" if elsewhere else ""
    return f"all {workers.slots} verification slot{'s are' if workers.slots != 1 else ' is'} busy{other}"


def waiting_reason(depth: QueueDepth, workers: QueueWorkers | None) -> str:
    """Why queued runs wait, in a curator's words ("" when none waits)."""
    if not depth.queued:
        return ""
    parts = []
    if depth.awaiting_model:
        parts.append(f"{depth.awaiting_model} wait for their KG's first structural model to finish training")
    rest = depth.queued - depth.awaiting_model
    if rest and workers is not None:
        if not workers.workers:
            parts.append(f"{rest} wait because no verification worker is running")
        elif slots := _slots_text(workers, depth.running):
            parts.append(f"{rest} wait: {slots}")
        else:
            parts.append(f"{rest} are being handed to a verification worker")
    return "; ".join(parts)


def run_wait_reason(run: Run, place: QueuePlace, workers: QueueWorkers | None) -> str:
    """Why this queued run has not started, in a curator's words ("" once it has)."""
    if run.status != Run.Status.QUEUED:
        return ""
    if run.awaiting_model_id:
        return awaited_training(run)
    if place.position is None:
        return "Not in the workers' queue yet: it is sent there in a moment (a message lost on the way is sent again)."
    if workers is None:
        return "The workers cannot be asked what they are doing right now."
    if not workers.workers:
        return "No verification worker is running: it starts when one does (an administrator's Health page says more)."
    ahead = f"{place.position - 1} run{'s' if place.position != 2 else ''} ahead of it" if place.position > 1 else ""
    if slots := _slots_text(workers, queue_depth().running):
        return f"Waiting: {slots}" + (f", {ahead}." if ahead else "; it is next.")
    return f"Waiting for the {ahead} to be taken." if ahead else "A worker is taking it."


def _queue() -> tuple[bool, str]:
    """How many runs wait and why, and how many are being investigated (information, never unhealthy)."""
    depth = queue_depth()
    why = waiting_reason(depth, queue_workers()[queue_of(RUN_VERIFICATION)])
    return True, f"{depth.queued} run(s) queued, {depth.running} running" + (f": {why}" if why else "")


def _structural_models() -> tuple[bool, str]:
    """Per local KG, its structural model: "codex-s: training (45%), about 6 min left — training: network 2 of 5, …",
    in a curator's words, then the job's, then what an administrator runs when it needs training. Not trained yet or
    still training is fine (the tools say so); a failed or stalled job with no ready model is not."""
    statuses = structural_statuses()
    if not statuses:
        return True, "no local KG loaded"
    return all(s.ok for s in statuses), "; ".join(
        f"{s.kg}: {s.text}" + (f" — {s.detail}" if s.detail else "") + (f" (to train it: {s.remedy})" if s.remedy else "")
        for s in statuses)


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
    depth = queue_depth()
    return {"model": model, "queued": depth.queued, "running": depth.running,
            "waiting": waiting_reason(depth, verification_workers())}


def verification_workers() -> QueueWorkers | None:
    """The verification queue's workers, asked at most every STATUS_CACHE_SECONDS (every open page polls)."""
    try:
        cached = cache.get(WORKERS_CACHE_KEY)
    except redis.RedisError:
        cached = None
    if cached is None:
        try:
            cached = asdict(queue_workers()[queue_of(RUN_VERIFICATION)])
        except Exception:  # noqa: BLE001 — the broker is down: the administrators' report says so
            return None
        with contextlib.suppress(redis.RedisError):
            cache.set(WORKERS_CACHE_KEY, cached, STATUS_CACHE_SECONDS)
    return QueueWorkers(**{**cached, "names": tuple(cached.get("names") or ())})


def liveness() -> dict:
    """What anyone may ask (load balancers): is the web process up and its database reachable. Cheap, and
    it names no version, host or error."""
    try:
        ok, _ = _database()
    except Exception:  # noqa: BLE001 — down is the answer, the reason is for administrators
        ok = False
    return {"ok": ok, "checks": [], "detail": "sign in as an administrator for the full report"}
