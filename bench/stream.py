"""Run-step streaming under load: the delay from a step's commit to its arrival at a websocket client.

    DEBUG=1 .venv/bin/python bench/stream.py [--runs 50] [--steps 20] [--interval 0.25]

The production path end to end, on the embedded PostgreSQL and Redis (or DATABASE_URL / REDIS_URL):
- a real Daphne server (``kgv_web.asgi``, HTTP + websockets) in a subprocess;
- ``--runs`` Run rows, each followed by one browser-like websocket client at ``/ws/runs/<id>/?after=0``,
  signed in with a viewer's session cookie; the clients run in a second subprocess (the way browsers are
  separate from the server), so their work does not compete with the writers for this process's GIL;
- one writer thread per run in this process, as a Celery worker's threads would be: every ``--interval``
  seconds (± 20 % jitter) it stores a step the way ``verifier.runner`` does, one transaction per step,
  ``publish_step`` broadcasting it after the commit through the Channels layer on Redis.

The commit time is taken by an ``on_commit`` callback registered before the publish (callbacks run in order,
right after COMMIT); the arrival time is taken by the client when the websocket frame is decoded. Both clocks
are this machine's ``time.time()``. Prints figures only; asserts nothing. The rows it creates are deleted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent
SERVER_LOG = PROJECT_DIR / "bench" / "results" / "stream-server.log"
sys.path.insert(0, str(PROJECT_DIR))


# ------------------------------------------------------------------------------------------------
# The clients (a subprocess: ``bench/stream.py --clients PORT COOKIE RUN_ID…``); no Django here.
# ------------------------------------------------------------------------------------------------

def run_clients(port: int, cookie: str, run_ids: list[int], expected: int, timeout: float) -> None:
    """Follow every run over its own websocket; print ``ready`` once all are open, then one JSON line
    {"<run>:<seq>": arrival time} when every run has delivered ``expected`` steps (or at ``timeout``)."""
    import txaio

    txaio.use_asyncio()
    from autobahn.asyncio.websocket import WebSocketClientFactory, WebSocketClientProtocol

    arrivals: dict[str, float] = {}
    opened = asyncio.Event()
    done = asyncio.Event()
    counts = {run_id: 0 for run_id in run_ids}
    open_count = [0]

    class Follower(WebSocketClientProtocol):
        def onOpen(self) -> None:  # noqa: N802 - autobahn's callback name
            open_count[0] += 1
            if open_count[0] == len(run_ids):
                opened.set()

        def onMessage(self, payload: bytes, is_binary: bool) -> None:  # noqa: N802
            now = time.time()
            message = json.loads(payload)
            if message["type"] != "run.step":
                return
            step = message["step"]
            arrivals[f"{step['run']}:{step['seq']}"] = now
            counts[step["run"]] += 1
            if all(count >= expected for count in counts.values()):
                done.set()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for run_id in run_ids:
            factory = WebSocketClientFactory(f"ws://127.0.0.1:{port}/ws/runs/{run_id}/?after=0",
                                             headers={"Cookie": f"sessionid={cookie}", "Origin": f"http://127.0.0.1:{port}"})
            factory.protocol = Follower
            await loop.create_connection(factory, "127.0.0.1", port)
        await asyncio.wait_for(opened.wait(), 30)
        print("ready", flush=True)
        try:
            await asyncio.wait_for(done.wait(), timeout)
        except TimeoutError:
            pass
        print(json.dumps(arrivals), flush=True)

    asyncio.run(main())


# ------------------------------------------------------------------------------------------------
# The benchmark (this process: Django, the writers, the server and the clients as subprocesses)
# ------------------------------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_for_port(port: int, process: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the server exited during start-up (code {process.returncode}); see {SERVER_LOG}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"the server did not listen on port {port} within {timeout:.0f} s")


def _create_rows(runs: int):
    from django.contrib.auth import get_user_model
    from django.test import Client

    from verifier.models import Entity, KnowledgeGraph, Relation, Run, VerificationTask
    from verifier.roles import VIEWER, set_role

    kg, _ = KnowledgeGraph.objects.get_or_create(name="bench-stream", defaults={"title": "bench/stream.py"})
    relation, _ = Relation.objects.get_or_create(kg=kg, external_id="r", defaults={"label": "related to"})
    run_rows = []
    for index in range(runs):
        head, _ = Entity.objects.get_or_create(kg=kg, external_id=f"h{index}")
        tail, _ = Entity.objects.get_or_create(kg=kg, external_id=f"t{index}")
        task, _ = VerificationTask.objects.get_or_create(kg=kg, head=head, relation=relation, tail=tail)
        run_rows.append(Run.objects.create(task=task, status=Run.Status.RUNNING))
    user, _ = get_user_model().objects.get_or_create(username="bench-stream-viewer")
    set_role(user, VIEWER)
    client = Client()
    client.force_login(user)
    return kg, run_rows, client.cookies["sessionid"].value


def _writer(run, steps: int, interval: float, commits: dict, warm: dict, barriers: tuple) -> None:
    """Store ``steps`` steps of ``run`` like verifier.runner._persist does, recording each commit time.

    Step 1 is the warm-up (this thread's first database connection, the process's first publish), stored and
    timed on its own; every writer has stored it before the measured steps start."""
    from django.db import connection, transaction

    from verifier.models import Step
    from verifier.realtime.publish import publish_step

    def store(seq: int, into: dict) -> None:
        with transaction.atomic():
            row = Step.objects.create(run=run, seq=seq, kind="thought", content=f"thought {seq} of run {run.pk}",
                                      prompt_tokens=100, completion_tokens=20, duration_ms=int(interval * 1000))
            transaction.on_commit(lambda key=f"{run.pk}:{seq}": into.__setitem__(key, time.time()))
            publish_step(row)

    try:
        barriers[0].wait()
        store(1, warm)
        barriers[1].wait()
        for seq in range(2, steps + 2):
            time.sleep(interval * random.uniform(0.8, 1.2))
            store(seq, commits)
    finally:
        connection.close()


def _figures(label: str, commits: dict, arrivals: dict) -> None:
    from bench.bench_figures import pct

    delays = [(arrivals[key] - committed) * 1000 for key, committed in commits.items() if key in arrivals]
    print(f"{label}: committed {len(commits)}, arrived {len(delays)}, lost {len(commits) - len(delays)}")
    if delays:
        print(f"  commit → websocket arrival: p50 {pct(delays, 0.5):.1f} ms  p95 {pct(delays, 0.95):.1f} ms  "
              f"p99 {pct(delays, 0.99):.1f} ms  max {max(delays):.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=50, help="runs streaming at once, one client each")
    parser.add_argument("--steps", type=int, default=20, help="steps per run")
    parser.add_argument("--interval", type=float, default=0.25, help="seconds between a run's steps (±20%%)")
    parser.add_argument("--clients", nargs="+", help=argparse.SUPPRESS)  # internal: PORT COOKIE EXPECTED TIMEOUT RUN_ID…
    args = parser.parse_args()
    if args.clients:
        port, cookie, expected, timeout, *run_ids = args.clients
        run_clients(int(port), cookie, [int(r) for r in run_ids], int(expected), float(timeout))
        return

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kgv_web.settings")
    os.environ.setdefault("DEBUG", "1")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from django.conf import settings

    from verifier.models import VerificationTask

    kg, runs, cookie = _create_rows(args.runs)
    port = _free_port()
    SERVER_LOG.parent.mkdir(parents=True, exist_ok=True)
    with SERVER_LOG.open("w") as log:
        server = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "kgv_web.asgi:application"],
                                  cwd=PROJECT_DIR, env=os.environ.copy(), stdout=log, stderr=subprocess.STDOUT,
                                  start_new_session=True)
    clients = None
    try:
        _wait_for_port(port, server)
        timeout = args.steps * args.interval * 1.2 + 30
        clients = subprocess.Popen([sys.executable, __file__, "--clients", str(port), cookie, str(args.steps + 1), str(timeout),
                                    *[str(r.pk) for r in runs]], cwd=PROJECT_DIR, stdout=subprocess.PIPE, text=True)
        if clients.stdout.readline().strip() != "ready":
            raise SystemExit("the websocket clients did not all connect")
        commits: dict[str, float] = {}
        warm: dict[str, float] = {}
        barriers = (threading.Barrier(len(runs) + 1), threading.Barrier(len(runs) + 1))
        writers = [threading.Thread(target=_writer, args=(run, args.steps, args.interval, commits, warm, barriers))
                   for run in runs]
        for writer in writers:
            writer.start()
        barriers[0].wait()
        barriers[1].wait()
        began = time.time()
        for writer in writers:
            writer.join()
        wall = time.time() - began
        arrivals = json.loads(clients.stdout.readline() or "{}")
    finally:
        for process in (clients, server):
            if process is not None and process.poll() is None:
                process.terminate()
                process.wait(timeout=20)
        VerificationTask.objects.filter(kg=kg).delete()  # the runs and steps go with them
        kg.delete()

    print(f"channel layer: {settings.CHANNEL_LAYERS['default']['BACKEND']}; server: daphne on 127.0.0.1:{port}")
    print(f"{len(runs)} runs streaming at once, {args.steps} measured steps each, one per {args.interval:.2f} s ±20 % "
          f"per run: {len(commits) / wall:.0f} steps/s committed over {wall:.1f} s")
    _figures("measured steps (target p95 ≤ 100 ms)", commits, arrivals)
    _figures("warm-up step of each run (first connection and first publish of the writers' process)", warm, arrivals)


if __name__ == "__main__":
    main()
