"""``manage.py evaluate_suite``: the table of the agent, an ablation and a baseline, through the session's real
Celery worker (scripted model), with a seed memory bank for the KG, written as files and shown in the workbench."""

import json

import pytest
from django.core.management import CommandError, call_command

from verifier import confidence
from verifier.memory import bank
from verifier.memory.bank import SEED_BANK
from verifier.models import Evaluation, MemoryEntry, RunMemory

pytestmark = pytest.mark.django_db(transaction=True)

DATASET = "Q42\tP27\tQ145\ttrue\nQ42\tP19\tQ350\ttrue\nQ42\tP27\tQ142\tfalse\nQ90\tP17\tQ145\tfalse\n"


@pytest.fixture
def quick_model(scripted_model):
    investigator = scripted_model.investigator
    delay, investigator.delay = investigator.delay, 0.05
    yield investigator
    investigator.delay = delay


@pytest.mark.slow
def test_the_suite_fills_the_table_row_by_row_with_the_seed_memory_bank(world_kg, tmp_path, celery_worker_process,
                                                                          quick_model, capsys, monkeypatch):
    # the shipped bank's CoDEx-S cases, as a bank for the world KG (whose ids are Wikidata's): a run is guided by
    # the cases of its own KG
    seed = json.loads(SEED_BANK.read_text())
    seed["entries"] = [{**entry, "kg": "world"} for entry in seed["entries"] if entry["kg"] == "codex-s"]
    world_bank = tmp_path / "world_bank.json"
    world_bank.write_text(json.dumps(seed))
    monkeypatch.setattr(bank, "SEED_BANK", world_bank)
    path = tmp_path / "world.tsv"
    path.write_text(DATASET)
    out = tmp_path / "report"
    call_command("evaluate_suite", benchmarks=str(path), kg=world_kg.name, configs="agent,agent-no-memory,zero-shot",
                 n=4, concurrency=4, suite="world-suite", out=out, no_progress=True)
    printed = capsys.readouterr().out
    assert f"Memory bank seeded with {MemoryEntry.objects.count()} investigations ({world_bank.name}): " in printed
    assert MemoryEntry.objects.filter(kg=world_kg).count() == MemoryEntry.objects.count() > 0
    # and with the shipped confidence model in force, as `make demo` has it; the world KG's structural model, trained
    # for the suite, puts the KG's own label-free weighing in force
    assert f"Verdict confidence: {confidence.active_model(None).source}." in printed
    assert confidence.active_model(world_kg.pk).source == confidence.STRUCTURAL_ALONE
    assert f"Using the running Celery worker(s): {celery_worker_process}" in printed

    evaluations = list(Evaluation.objects.filter(suite="world-suite").order_by("created_at"))
    assert [e.label for e in evaluations] == ["KGV-Agent", "KGV-Agent − memory", "Zero-shot"]
    assert all(e.status == Evaluation.Status.FINISHED and e.metrics["n"] == 4 and e.metrics["pending"] == 0 for e in evaluations)
    agent, no_memory, zero_shot = (e.metrics for e in evaluations)
    # The scripted investigator answers Correct after two tool calls: right on the two true triples.
    assert agent["accuracy"] == no_memory["accuracy"] == 0.5 and agent["recall"] == 1.0
    assert agent["efficiency"]["tool_calls"] == 2.0 and agent["efficiency"]["tool_usage"].keys() == {"KG_Neighbor", "KG_Path"}
    # The memories of the claims' relations guided the agent's runs and none of the ablation's, as their logs show.
    assert agent["efficiency"]["memories"] > 0 and no_memory["efficiency"]["memories"] == 0.0
    assert RunMemory.objects.filter(run__evaluation_items__evaluation=evaluations[1]).count() == 0
    # Its investigation script is not a zero-shot answer: unparsable, counted wrong, not guessed.
    assert zero_shot["answer_rate"] == 0.0 and zero_shot["accuracy"] == 0.0
    assert all(e.metrics["leakage"]["runs_with_query_triple"] == 0 for e in evaluations)

    table = (out / "results.md").read_text()
    assert "| | world.tsv Acc | F1 | P | R |" in table
    assert "| KGV-Agent | 50.0 | 66.7 | 50.0 | 100.0 |" in table and "| Zero-shot | 0.0 | 0.0 | 0.0 | 0.0 |" in table
    record = json.loads((out / "results.json").read_text())
    assert [e["configuration"] for e in record["evaluations"]] == ["KGV-Agent", "KGV-Agent − memory", "Zero-shot"]
    assert (out / "charts" / "configurations.svg").exists()

    # The same command again finds every evaluation finished and queues nothing.
    runs_before = sum(e.items.exclude(run=None).count() for e in evaluations)
    call_command("evaluate_suite", benchmarks=str(path), kg=world_kg.name, configs="agent,agent-no-memory,zero-shot",
                 n=4, concurrency=4, suite="world-suite", out=out, no_progress=True)
    assert Evaluation.objects.filter(suite="world-suite").count() == 3
    assert sum(e.items.exclude(run=None).count() for e in evaluations) == runs_before
    assert all(item.attempts == 1 for e in evaluations for item in e.items.all())


def test_the_suite_explains_unknown_benchmarks_and_files_without_a_kg(tmp_path):
    with pytest.raises(CommandError, match="unknown benchmark or configuration: nope, agent-no-luck"):
        call_command("evaluate_suite", benchmarks="nope", configs="agent,agent-no-luck")
    path = tmp_path / "mine.tsv"
    path.write_text(DATASET)
    with pytest.raises(CommandError, match="needs --kg"):
        call_command("evaluate_suite", benchmarks=str(path))
