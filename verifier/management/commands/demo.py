"""``manage.py demo`` — the whole product on one machine: migrate, load CoDEx-S (with FB15k-237 as its reference KG,
verifier/structure/reference.py; FB15k-237's own structural model is trained on request), queue a sample of its
validation triples (first start), create a demo login, run the web server and one Celery worker per queue
(verifier/queueing.py) until Ctrl-C, then stop everything this command started (including the embedded
PostgreSQL and Redis, when it was the one to start them)."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from kgv_web.embedded import embedded_dir
from verifier import confidence, health
from verifier.errors import ApplicationError
from verifier.management.commands.load_kg import REFERENCES, add_reference
from verifier.memory.bank import seed_if_empty
from verifier.models import KnowledgeGraph, VerificationTask
from verifier.queue_filters import by_origin
from verifier.queueing import worker_commands
from verifier.roles import ADMIN, CURATOR, REVIEWER, VIEWER, set_role
from verifier.services import queue_validation_sample
from verifier.structure.training import ensure_model

DEMO_USERNAME = "demo"
DEMO_SAMPLE = 20  # flagged triples queued on the first start
DEMO_USERS = {DEMO_USERNAME: ADMIN, "reviewer": REVIEWER, "curator": CURATOR, "viewer": VIEWER}


def _port_free(host: str, port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex((host, port)) != 0


class Command(BaseCommand):
    help = "Bring up KGV on embedded defaults: database, broker, demo data, web server and worker."

    def add_arguments(self, parser):
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument("--concurrency", type=int, default=2, help="verification worker processes")
        parser.add_argument("--no-serve", action="store_true", help="prepare everything, then exit")

    def handle(self, *args, **options):
        host, port = options["host"], options["port"]
        if not options["no_serve"] and not _port_free(host, port):
            raise CommandError(f"port {port} on {host} is in use: stop what runs there or pass --port")

        self.stdout.write("Migrating the database…")
        call_command("migrate", interactive=False, verbosity=0)
        self._load_demo_kg()
        self._load_reference_kg()
        self._seed_memory_bank()
        self._queue_sample()
        for seeded in confidence.seed_shipped_models():
            self.stdout.write(confidence.seeded_line(seeded))
        password = self._demo_login()
        if options["no_serve"]:
            return
        self._serve(host, port, options["concurrency"], password)

    def _load_demo_kg(self) -> None:
        kg = KnowledgeGraph.objects.filter(name="codex-s").first()
        if kg is not None and kg.version > 0:
            self.stdout.write(f"CoDEx-S already loaded (version {kg.version}).")
            # Installations loaded before structural models existed (or whose training stopped) get one queued.
            model = ensure_model(kg, reason="demo start")
            if model is not None and model.status != model.Status.READY:
                self.stdout.write("Queued the structural model of CoDEx-S: the worker trains it in the background.")
            return
        self.stdout.write("Loading CoDEx-S (first start only: embedding 2,034 passages takes a few minutes)…")
        call_command("load_kg", "codex-s")

    def _load_reference_kg(self) -> None:
        """An installation whose CoDEx-S was loaded before reference KGs existed gets FB15k-237 as its reference, its
        ready model recalibrated to weigh it (a minute). A fresh one got it from load_kg."""
        add_reference(KnowledgeGraph.objects.get(name="codex-s"), REFERENCES["codex-s"], self.stdout)

    def _demo_login(self) -> str:
        """Demo users, one per role, sharing a password generated once and kept beside the embedded data."""
        secret_file = embedded_dir() / "demo-password"
        if not secret_file.exists():
            secret_file.write_text(secrets.token_urlsafe(12))
            secret_file.chmod(0o600)
        password = secret_file.read_text().strip()
        for username, role in DEMO_USERS.items():
            user, _ = get_user_model().objects.get_or_create(username=username)
            user.is_staff = user.is_superuser = role == ADMIN
            user.set_password(password)
            user.save()
            set_role(user, role)
        return password

    def _seed_memory_bank(self) -> None:
        if seeded := seed_if_empty():
            self.stdout.write(seeded)

    def _queue_sample(self) -> None:
        """On the first start, a work queue to try: labelled CoDEx-S validation triples, half of them false."""
        marker = embedded_dir() / "demo-queue"
        kg = KnowledgeGraph.objects.get(name="codex-s")
        if marker.exists() or by_origin(VerificationTask.objects.filter(kg=kg)).exists():
            return
        try:
            report = queue_validation_sample(kg=kg, n=DEMO_SAMPLE, seed=0)
        except ApplicationError as exc:
            self.stderr.write(f"No sample queued: {exc}")
            return
        marker.write_text("queued\n")
        self.stdout.write(f"Queued {report.created} labelled CoDEx-S validation triples to try (half of them false).")

    def _serve(self, host: str, port: int, concurrency: int, password: str) -> None:
        from kgv_web.embedded_llm import provide_local_llm

        started = provide_local_llm()  # the embedded model, unless LLM_BASE_URL points elsewhere
        self.stdout.write(f"LLM endpoint: {settings.LLM_BASE_URL} (model {settings.LLM_MODEL})"
                          + (" — embedded, started by this command" if started else ""))
        bin_dir = Path(sys.executable).parent
        children = [subprocess.Popen([str(bin_dir / "daphne"), "-b", host, "-p", str(port), "kgv_web.asgi:application"],
                                     cwd=settings.BASE_DIR)]
        children += [subprocess.Popen(command, cwd=settings.BASE_DIR, preexec_fn=niceness) for command, niceness in
                     worker_commands(bin_dir / "celery", concurrency, embedded_dir() / "celerybeat-schedule")]
        stopping = False

        def stop(*_):
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        try:
            self._wait_until_healthy(children, lambda: stopping)
            url = f"http://{host}:{port}/"
            self.stdout.write(self.style.SUCCESS(
                f"\nKGV is up at {url}\n  sign in as '{DEMO_USERNAME}' (admin), 'reviewer', 'curator' or 'viewer', "
                f"all with password '{password}'\n"
                f"  health: {url}health/\nPress Ctrl-C to stop.\n"
            ))
            while not stopping and all(child.poll() is None for child in children):
                time.sleep(0.5)
            if not stopping:
                raise CommandError("a KGV process exited unexpectedly; see the output above")
        finally:
            self.stdout.write("Stopping the web server and the workers…")
            for child in children:
                if child.poll() is None:
                    child.terminate()
            for child in children:
                try:
                    child.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    child.kill()

    def _wait_until_healthy(self, children, stopping, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not stopping():
            if any(child.poll() is not None for child in children):
                raise CommandError("a KGV process exited during start-up; see the output above")
            if health.check_all()["ok"]:
                return
            time.sleep(1)
        if not stopping():
            raise CommandError(f"the services did not become healthy within {timeout:.0f}s")
