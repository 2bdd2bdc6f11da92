"""Shared fixtures: real data subsets from ../shared/data and a real Celery worker process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.conf import settings

from tests.live_server import daphne_server, server_url  # noqa: E402,F401  (fixtures shared by the test tree)
from tests.users import make_user  # noqa: E402,F401
from tests.world import claims_kg, codex_like, shipped_weighing, weighed_by_every_kg, world, world_kg  # noqa: E402,F401

PROJECT_DIR = Path(__file__).resolve().parent.parent


def pytest_collection_modifyitems(items):
    """The browser and fault suites are marked by where they live (``make test-fast`` leaves them out)."""
    for item in items:
        parts = Path(str(item.fspath)).parts
        for suite in ("browser", "faults"):
            if suite in parts and "tests" in parts:
                item.add_marker(getattr(pytest.mark, suite))


@pytest.fixture(scope="session")
def data_dir() -> Path:
    path = settings.KGV_DATA_DIR
    if not (path / "codex-s").exists():
        pytest.fail(f"the shared KG data is missing at {path} (set KGV_DATA_DIR)")
    return path


def _first_lines(path: Path, keep) -> list[str]:
    with path.open(encoding="utf-8") as handle:
        return [line for line in handle if keep(line)]


@pytest.fixture(scope="session")
def codex_subset(tmp_path_factory, data_dir) -> Path:
    """A CoDEx-S-shaped folder holding the real data restricted to the first 200 training triples."""
    source = data_dir / "codex-s"
    target = tmp_path_factory.mktemp("codex-subset")
    for sub in ("triples", "entities", "types"):
        (target / sub).mkdir()
    triples = (source / "triples" / "train.txt").read_text(encoding="utf-8").splitlines(keepends=True)[:200]
    (target / "triples" / "train.txt").write_text("".join(triples), encoding="utf-8")
    entities = {part for line in triples for part in (line.split("\t")[0], line.split("\t")[2].strip())}
    relations = {line.split("\t")[1] for line in triples}
    for name in ("entity2name.txt", "entity2des.txt"):
        keep = _first_lines(source / "entities" / name, lambda line: line.split("\t", 1)[0] in entities)
        (target / "entities" / name).write_text("".join(keep), encoding="utf-8")
    keep = _first_lines(source / "entities" / "wikidata_terms.jsonl", lambda line: json.loads(line)["id"] in entities)
    (target / "entities" / "wikidata_terms.jsonl").write_text("".join(keep), encoding="utf-8")
    all_relations = json.loads((source / "relations.json").read_text(encoding="utf-8"))
    (target / "relations.json").write_text(json.dumps({k: v for k, v in all_relations.items() if k in relations}))
    entity_types = json.loads((source / "types" / "entity2types.json").read_text(encoding="utf-8"))
    subset_types = {k: v for k, v in entity_types.items() if k in entities}
    (target / "types" / "entity2types.json").write_text(json.dumps(subset_types))
    used_types = {t for ts in subset_types.values() for t in ts}
    types = json.loads((source / "types" / "types.json").read_text(encoding="utf-8"))
    (target / "types" / "types.json").write_text(json.dumps({k: v for k, v in types.items() if k in used_types}))
    return target


@pytest.fixture(scope="session")
def scripted_model():
    """The scripted OpenAI-compatible model of the session's Celery worker and web server: a short, well-formed
    investigation of whatever claim it is given (tests/browser/model.py)."""
    from tests.browser.model import ScriptedInvestigator
    from tests.openai_server import ScriptedOpenAIServer

    investigator = ScriptedInvestigator()
    with ScriptedOpenAIServer(investigator) as server:
        server.investigator = investigator
        yield server


@pytest.fixture(scope="session")
def app_env(scripted_model):
    """Environment of the processes a test starts (worker, web server): the scripted model, no local one; webhooks
    may reach the tests' receivers on this machine (loopback)."""
    return {"LLM_BASE_URL": scripted_model.url, "LLM_MODEL": "scripted", "LLM_API_KEY": "test", "LLM_GRAMMAR": "0",
            "KGV_LOCAL_LLM": "off", "KGV_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8"}


@pytest.fixture(autouse=True)
def configured_as_the_workers(request):
    """While a test has the session's worker (or web server), this process's settings name the model endpoint theirs
    do (tests.workers.configured_as): a run created here is settled for the model that answers it on the worker."""
    if "celery_worker_process" not in request.fixturenames:
        yield
        return
    from tests.workers import configured_as

    with configured_as(request.getfixturevalue("app_env")):
        yield


@pytest.fixture(scope="session")
def celery_worker_process(django_db_setup, django_db_blocker, app_env):
    """The session's real Celery worker (a separate process, 4 threads) on every queue of the embedded Redis broker
    and the test database, answering runs with the scripted model; its hostname is yielded. Tasks it
    runs see only committed rows (use transactional tests)."""
    from kgv_web.celery import app
    from tests.workers import celery_worker

    app.control.purge()  # tasks left queued by earlier sessions name runs of a database that is gone
    with django_db_blocker.unblock(), celery_worker(pool="threads", concurrency=4, queue=",".join(settings.KGV_QUEUES),
                                                     env=app_env) as worker:
        yield worker.hostname
