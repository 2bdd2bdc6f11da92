"""The memory bank: the seed bank the demo loads, export → import, files that are not banks, and retrieval behind filters."""

import json
import re

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from pgvector.django import CosineDistance

from verifier.memory import bank, encoder
from verifier.models import AuditEvent, KnowledgeGraph, MemoryEntry

pytestmark = pytest.mark.django_db


@pytest.mark.slow
def test_the_seed_bank_loads_and_guides_similar_claims():
    imported = bank.import_bank(bank.SEED_BANK)
    added = imported.added
    assert added >= 4 and imported.updated == imported.unchanged == 0
    verdicts = set(MemoryEntry.objects.values_list("verdict", flat=True))
    assert verdicts == {"correct", "incorrect"}  # both outcomes are shown to the agent
    for entry in MemoryEntry.objects.all():  # reviewed by a curator (kept or retired), or saying it awaits review
        assert "Final Answer: [" in entry.trajectory
        reviewed = re.search(r"reviewer|reviewed (and retired )?by ", entry.provenance.replace(bank.UNREVIEWED, ""))
        assert bool(reviewed) != entry.awaits_review, entry.provenance
        assert (entry.status == MemoryEntry.Status.RETIRED) == ("retired" in entry.provenance), entry.provenance
    # A bootstrapped case's answer is the weighed evidence's explanation: never the small model's unchecked prose
    # ("the brief states that …"), which a curator reading the bank or a model reading the case would take as fact.
    for trajectory in MemoryEntry.objects.filter(provenance__startswith="bootstrapped").values_list("trajectory", flat=True):
        answer = trajectory.rsplit("Final Answer: ", 1)[1]
        assert re.fullmatch(r"\[(Correct|Incorrect)\] The weighed evidence (agrees with|outweighs) the language model's own "
                            r"answer \((Correct|Incorrect)\): weighing [^;]* that the triple is true; left out, as the "
                            r"confidence model gives no weight to them: the language model's own answer \(\w+\)\.", answer), answer
    nearest = bank.retrieve("Alice Munro country of citizenship Brazil", k=1)[0]
    assert nearest.triple_text == "Margaret Atwood country of citizenship Brazil" and nearest.similarity > 0.5
    assert bank.import_bank(bank.SEED_BANK) == bank.Imported(0, 0, added)  # importing again changes nothing


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


def test_an_import_brings_entries_awaiting_review_up_to_the_files_version_and_never_overwrites_a_review(tmp_path):
    """An installation seeded from an older bank gets the re-derived lessons and the reviews done elsewhere;
    an entry a curator has reviewed here keeps that review."""
    trajectory = "Thought: t\nFinal Answer: [Incorrect] Because [E1]."
    waiting = bank.add_entry(triple_text="a r b", trajectory=trajectory, verdict="incorrect", lesson="the old lesson.",
                             provenance=f"bootstrapped from run 1; {bank.UNREVIEWED}")
    kept = bank.add_entry(triple_text="g r h", trajectory=trajectory, verdict="incorrect", lesson="a derived lesson.",
                          provenance=f"bootstrapped from run 3; {bank.UNREVIEWED}")
    reviewed_here = bank.add_entry(triple_text="c r d", trajectory=trajectory, verdict="incorrect", lesson="rosa's lesson.",
                                   provenance="bootstrapped from run 2; reviewed by rosa on 2026-11-29")
    path = tmp_path / "bank.json"
    path.write_text(json.dumps({"format": "kgv-memory-bank/1", "entries": [
        {"triple_text": "a r b", "trajectory": trajectory, "verdict": "incorrect", "lesson": "Decided by the evidence.",
         "status": "retired", "provenance": "bootstrapped from run 1; reviewed and retired by ana on 2026-11-28: a true fact"},
        {"triple_text": "c r d", "trajectory": trajectory, "verdict": "incorrect", "lesson": "another lesson.",
         "provenance": f"bootstrapped from run 2; {bank.UNREVIEWED}"},
        {"triple_text": "g r h", "trajectory": trajectory, "verdict": "incorrect",  # an export older than lessons
         "provenance": f"bootstrapped from run 3; {bank.UNREVIEWED}"},
        {"triple_text": "e r f", "trajectory": trajectory, "verdict": "incorrect"}]}))
    call_command("memory_bank", "import", str(path))
    waiting.refresh_from_db()
    reviewed_here.refresh_from_db()
    assert (waiting.lesson, waiting.status, waiting.awaits_review) == ("Decided by the evidence.", "retired", False)
    assert "retired by ana" in waiting.provenance
    event = AuditEvent.objects.get(action="memory.import")  # only the entry that changed
    assert event.object_id == str(waiting.pk) and event.actor is None
    assert (event.before["lesson"], event.before["status"], event.after["status"]) == ("the old lesson.", "active", "retired")
    assert (reviewed_here.lesson, reviewed_here.status, reviewed_here.provenance) == (
        "rosa's lesson.", "active", "bootstrapped from run 2; reviewed by rosa on 2026-11-29")
    kept.refresh_from_db()
    assert kept.lesson == "a derived lesson."  # a file without a lesson blanks none
    assert bank.import_bank(path) == bank.Imported(0, 0, 4)  # the file's version is now here: nothing more to do


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


def test_bootstrap_names_the_kg_it_cannot_find_and_starts_nothing():
    with pytest.raises(CommandError, match="no loaded KG named 'no-such-kg'"):
        call_command("memory_bank", "bootstrap", kg="no-such-kg")
    with pytest.raises(CommandError, match="bootstrap needs --kg NAME"):
        call_command("memory_bank", "bootstrap")
    assert not MemoryEntry.objects.exists()


def test_a_precedent_is_found_behind_many_nearer_entries_the_search_filters_out():
    """The status and relation filters never hide a precedent: a bank whose 400 nearest entries were retired, and
    whose table holds rows of rolled-back transactions, still yields the one entry behind them. (An HNSW index
    filtered this way once missed the nearest entry outright; the bank is ranked exactly instead.)"""
    claim = "Douglas Adams country of citizenship United Kingdom"
    texts = [f"Douglas Adams {word} country of citizenship United Kingdom" for word in range(400)]
    MemoryEntry.objects.bulk_create(
        MemoryEntry(triple_text=text, trajectory="x", verdict="correct", embedding=vector, relation_label="country of citizenship")
        for text, vector in zip(texts, encoder.encode(texts), strict=True))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE verifier_memoryentry")  # the planner expects most rows to pass the filters
    MemoryEntry.objects.update(status=MemoryEntry.Status.RETIRED)
    sartre = bank.add_entry(triple_text="Jean-Paul Sartre country of citizenship France", trajectory="x", verdict="correct",
                            relation_label="country of citizenship")
    plan = (MemoryEntry.objects.filter(status="active", relation_label="country of citizenship")
            .annotate(distance=CosineDistance("embedding", encoder.encode_one(claim))).order_by("distance")[:3].explain())
    assert "hnsw" not in plan.lower()  # an exact ranking
    assert [m.id for m in bank.for_claim(claim, 3, "country of citizenship")] == [sartre.pk]


def test_an_entry_keeps_its_kg_across_installations_and_is_linked_once_that_kg_is_loaded(tmp_path, capsys):
    here = KnowledgeGraph.objects.create(name="tiny", version=1)
    bank.add_entry(triple_text="Ada Lovelace place of birth London", trajectory="Final Answer: [Correct] [E1].",
                   verdict="correct", relation_label="place of birth", kg=here)
    path = tmp_path / "bank.json"
    bank.export_bank(path)
    assert json.loads(path.read_text())["entries"][0]["kg"] == "tiny"
    # another installation, where that KG is not loaded yet: the entry comes in of no known KG
    MemoryEntry.objects.all().delete()
    here.delete()
    assert bank.import_bank(path) == bank.Imported(1, 0, 0)
    entry = MemoryEntry.objects.get()
    assert entry.kg is None and entry.kg_name == "tiny"
    call_command("memory_bank", "import", str(path))
    assert "Cases of KGs not loaded here (tiny: 1) guide their claims once the KG is loaded" in capsys.readouterr().out
    assert bank.for_claim("Charles Babbage place of birth Walworth", 3, "place of birth",
                          kg=KnowledgeGraph.objects.create(name="other", version=1)) == []  # not another KG's case
    again = tmp_path / "again.json"
    bank.export_bank(again)  # an export from here keeps the KG it was investigated on
    assert json.loads(again.read_text())["entries"][0]["kg"] == "tiny"
    # loading the KG links the entries investigated on it, once
    triples = tmp_path / "tiny.tsv"
    triples.write_text("Q1\tP19\tQ84\nQ2\tP19\tQ84\n")
    call_command("load_kg", str(triples), name="tiny", no_kge=True, no_embed=True, no_progress=True)
    assert "Memory bank: 1 entries investigated on tiny are now linked to it." in capsys.readouterr().out
    loaded = KnowledgeGraph.objects.get(name="tiny")
    assert MemoryEntry.objects.get().kg == loaded and bank.link_kg(loaded) == 0 and bank.waiting_for_their_kg() == ""
    # an entry from an export older than KG names takes the name from a newer file, and is linked
    MemoryEntry.objects.update(kg=None, kg_name="")
    assert bank.import_bank(path) == bank.Imported(0, 0, 1, linked=1)
    assert (MemoryEntry.objects.get().kg, MemoryEntry.objects.get().kg_name) == (loaded, "tiny")


def test_a_claim_is_guided_by_cases_of_its_relation_on_its_own_kg_not_by_another_kgs_relation_of_that_label():
    """Two KGs can give different relations one label ("place of birth" in CoDEx-S and FB15k-237)."""
    ours, theirs = (KnowledgeGraph.objects.create(name=name, version=1) for name in ("ours", "theirs"))
    trajectory = "Final Answer: [Correct] [E1]."
    own = bank.add_entry(triple_text="Alan Turing place of birth Maida Vale", trajectory=trajectory, verdict="correct",
                         relation_label="place of birth", kg=ours)
    unknown = bank.add_entry(triple_text="Grace Hopper place of birth New York City", trajectory=trajectory,
                             verdict="correct", relation_label="place of birth")
    other = bank.add_entry(triple_text="Charles Babbage place of birth Walworth", trajectory=trajectory,
                           verdict="correct", relation_label="place of birth", kg=theirs)
    claim = "Ada Lovelace place of birth London"
    assert {m.id for m in bank.for_claim(claim, 3, "place of birth")} == {own.pk, unknown.pk, other.pk}
    # an entry of no known KG (its KG not loaded here) guides no KG's claims of that label
    assert [m.id for m in bank.for_claim(claim, 3, "place of birth", kg=ours)] == [own.pk]
    assert [m.id for m in bank.for_claim(claim, 3, "place of birth", kg=theirs)] == [other.pk]
    # a near-identical claim guides across KGs, as across relations
    twin = bank.add_entry(triple_text="Ada Lovelace place of birth Marylebone, London", trajectory=trajectory,
                          verdict="correct", relation_label="place of birth", kg=theirs)
    assert twin.pk in {m.id for m in bank.for_claim(claim, 3, "place of birth", kg=ours)}
