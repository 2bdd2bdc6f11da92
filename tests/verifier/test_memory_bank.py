"""The memory bank's files: the seed bank the demo loads, export → import, and files that are not banks."""

import json

import pytest
from django.core.management import call_command

from verifier.memory import bank
from verifier.models import MemoryEntry

pytestmark = pytest.mark.django_db


def test_the_seed_bank_loads_and_guides_similar_claims():
    added, skipped = bank.import_bank(bank.SEED_BANK)
    assert added >= 4 and skipped == 0
    verdicts = set(MemoryEntry.objects.values_list("verdict", flat=True))
    assert verdicts == {"correct", "incorrect"}  # both outcomes are shown to the agent
    for entry in MemoryEntry.objects.all():
        assert "Final Answer: [" in entry.trajectory and "reviewer" in entry.provenance
    nearest = bank.retrieve("Alice Munro country of citizenship Brazil", k=1)[0]
    assert nearest.triple_text == "Margaret Atwood country of citizenship Brazil" and nearest.similarity > 0.5
    assert bank.import_bank(bank.SEED_BANK) == (0, added)  # importing again adds nothing


def test_export_then_import_round_trips_entries_and_their_status(tmp_path):
    kept = bank.add_entry(triple_text="a r b", trajectory="Thought: t\nFinal Answer: [Correct] Because [E1].", verdict="correct")
    retired = bank.add_entry(triple_text="c r d", trajectory="Thought: u\nFinal Answer: [Incorrect] Because [E2].", verdict="incorrect")
    retired.status = MemoryEntry.Status.RETIRED
    retired.save()
    path = tmp_path / "bank.json"
    call_command("memory_bank", "export", str(path))
    MemoryEntry.objects.all().delete()
    call_command("memory_bank", "import", str(path))
    assert dict(MemoryEntry.objects.values_list("triple_text", "status")) == {"a r b": "active", "c r d": "retired"}
    assert [m.triple_text for m in bank.retrieve(kept.triple_text, k=5)] == ["a r b"]  # retired entries never guide


def test_a_file_that_is_not_a_bank_is_refused_and_nothing_is_added(tmp_path):
    path = tmp_path / "bank.json"
    path.write_text(json.dumps({"format": "kgv-memory-bank/1", "entries": [
        {"triple_text": "x r y", "trajectory": "…", "verdict": "correct"}, {"triple_text": "no trajectory"}]}))
    with pytest.raises(ValueError, match="entry 2 lacks trajectory, verdict"):
        bank.import_bank(path)
    assert not MemoryEntry.objects.exists()
    path.write_text("{}")
    with pytest.raises(ValueError, match="not a KGV memory bank export"):
        bank.import_bank(path)
