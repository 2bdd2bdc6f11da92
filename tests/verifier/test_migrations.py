"""Data steps of migrations, run forward on rows written in the schema before them."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE_KG_NAME = ("verifier", "0024_support_items_in_the_order_found")
KG_NAME = ("verifier", "0025_memory_entry_kg_name")


@pytest.fixture
def migrate_to(transactional_db):
    """Migrate the verifier app to a given migration and return the app registry of that state; the database goes
    back to the latest migration afterwards."""
    def go(target):
        executor = MigrationExecutor(connection)
        executor.migrate([target])
        return MigrationExecutor(connection).loader.project_state([target]).apps

    yield go
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.slow
def test_memory_entries_take_the_name_of_their_linked_kg(migrate_to):
    old = migrate_to(BEFORE_KG_NAME)
    kg = old.get_model("verifier", "KnowledgeGraph").objects.create(name="codex-s")
    entries = old.get_model("verifier", "MemoryEntry").objects
    embedding = [0.0] * 384
    linked = entries.create(kg=kg, triple_text="Ada Lovelace occupation mathematician", trajectory="t",
                            verdict="correct", embedding=embedding)
    unlinked = entries.create(triple_text="Nicolas Cage place of birth Long Beach", trajectory="t",
                              verdict="correct", embedding=embedding)

    new = migrate_to(KG_NAME)
    named = new.get_model("verifier", "MemoryEntry").objects
    assert named.get(pk=linked.pk).kg_name == "codex-s"
    assert named.get(pk=unlinked.pk).kg_name == ""


BEFORE_RUN_REQUEST = ("verifier", "0032_claim_refused_left_out")
RUN_REQUEST = ("verifier", "0033_run_request")


def test_runs_stored_with_one_configuration_keep_it_as_their_request(migrate_to):
    old = migrate_to(BEFORE_RUN_REQUEST)
    kg = old.get_model("verifier", "KnowledgeGraph").objects.create(name="codex-s")
    entity = old.get_model("verifier", "Entity").objects
    head, tail = entity.create(kg=kg, external_id="Q42"), entity.create(kg=kg, external_id="Q145")
    relation = old.get_model("verifier", "Relation").objects.create(kg=kg, external_id="P27")
    task = old.get_model("verifier", "VerificationTask").objects.create(kg=kg, head=head, relation=relation, tail=tail)
    runs = old.get_model("verifier", "Run").objects
    queued = runs.create(task=task, config={"t_max": 3})
    finished = runs.create(task=task, status="succeeded", config={"t_max": 4, "memory_k": 2, "profile": "compact"})

    new = migrate_to(RUN_REQUEST).get_model("verifier", "Run").objects
    assert new.get(pk=queued.pk).request == {"t_max": 3}
    assert new.get(pk=finished.pk).request == new.get(pk=finished.pk).config == {"t_max": 4, "memory_k": 2, "profile": "compact"}
