"""Generated hostile files on every import path: KG files (TSV and N-Triples, through `manage.py load_kg`),
flagged triples (CSV, through the REST API) and memory-bank exports (JSON, through `manage.py memory_bank
import`).

Each file mixes well-formed lines with hostile ones — bytes that are not UTF-8, NUL bytes, binary junk,
missing columns, ids longer than the store holds, escapes that decode to no character, a byte-order
mark, CRLF line ends. The oracle knows which lines it spoiled: a file with none loads completely; a file
with one is refused with a message naming the first spoiled line, and nothing of it is stored. No file
ends in an exception the user would see as a crash."""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.faults.tally import tally
from tests.verifier.web.run_pages import ENTITIES, RELATIONS, make_world
from tests.verifier.web.workbench import client_for, fast_password_hashing  # noqa: F401  (autouse fixture)
from verifier.models import Entity, KnowledgeGraph, MemoryEntry, Triple, VerificationTask

pytestmark = pytest.mark.django_db

EXAMPLES = 60  # per import path
TRIED = tally("Hostile files", "files_tried", "refused_naming_the_problem", "loaded_whole")
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))

NAMES = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cc", "Cf", "Cs", "Zl", "Zp", "Zs")),
                min_size=1, max_size=12)


@dataclass
class Generated:
    body: bytes
    spoiled: list[int]  # numbers of the spoiled lines, in order; empty when every line is well-formed
    rows: set  # the distinct well-formed rows (what a clean file must load)


def _assemble(draw, good_line, bad_lines: dict[str, bytes], *, header: bytes = b"") -> Generated:
    """Lines drawn from ``good_line`` (returning (bytes, row)) with some replaced by hostile ones."""
    count = draw(st.integers(1, 8))
    lines, rows, spoiled = [], set(), []
    offset = 1 if header else 0
    for number in range(1, count + 1):
        kind = draw(st.sampled_from(["good"] * 3 + sorted(bad_lines)))
        if kind == "good":
            raw, row = draw(good_line)
            rows.add(row)
        else:
            raw = bad_lines[kind]
            spoiled.append(number + offset)
        lines.append(raw)
    ending = draw(st.sampled_from([b"\n", b"\r\n"]))
    bom = draw(st.sampled_from([b"", b"\xef\xbb\xbf"]))
    return Generated(bom + ending.join(([header] if header else []) + lines) + ending, spoiled, rows)


LONG_ID = b"x" * 300
TSV_BAD = {"latin-1": "Fran\xe7e\tP17\tQ1".encode("latin-1"), "nul": b"Q1\tP1\x00\tQ2", "binary": b"\x89PNG\xff\xfe\x00",
           "columns": b"Q1\tP1", "empty field": b"Q1\t\tQ2", "long id": b"Q1\tP1\t" + LONG_ID}


@st.composite
def tsv_line(draw):
    row = (draw(NAMES), draw(NAMES), draw(NAMES))
    return "\t".join(row).encode(), row


@st.composite
def tsv_files(draw):
    return _assemble(draw, tsv_line(), TSV_BAD)


NT_BAD = {"latin-1": '<http://e/Fran\xe7e> <http://r/p> <http://e/B> .'.encode("latin-1"),
          "nul": b"<http://e/A> <http://r/p> \"a\x00b\" .", "not a statement": b"<http://e/A> <http://r/p> .",
          "escape to NUL": b'<http://e/A> <http://www.w3.org/2000/01/rdf-schema#label> "a\\u0000" .',
          "escape past Unicode": b'<http://e/A> <http://www.w3.org/2000/01/rdf-schema#label> "\\U0011FFFF" .',
          "surrogate escape": b'<http://e/A> <http://www.w3.org/2000/01/rdf-schema#label> "\\uD800" .',
          "long IRI": b"<http://e/" + LONG_ID + b"> <http://r/p> <http://e/B> ."}
IRI_PART = st.text(alphabet="abcdefghijklmnopqrstuvwxyzé0123456789_-", min_size=1, max_size=10)


@st.composite
def nt_line(draw):
    head, relation, tail = draw(IRI_PART), draw(IRI_PART), draw(IRI_PART)
    return f"<http://e/{head}> <http://r/{relation}> <http://e/{tail}> .".encode(), (head, relation, tail)


@st.composite
def nt_files(draw):
    return _assemble(draw, nt_line(), NT_BAD)


def _write(tmp: Path, name: str, body: bytes) -> Path:
    path = tmp / name
    path.write_bytes(body)
    return path


def _snapshot() -> tuple[int, ...]:
    return (KnowledgeGraph.objects.count(), Entity.objects.count(), Triple.objects.count(), MemoryEntry.objects.count(),
            VerificationTask.objects.count())


def _load_kg(generated: Generated, suffix: str) -> None:
    TRIED["files_tried"] += 1
    before = _snapshot()
    with tempfile.TemporaryDirectory() as tmp:
        path = _write(Path(tmp), f"fuzz_{TRIED['files_tried']}{suffix}", generated.body)
        try:
            call_command("load_kg", str(path), "--no-kge", "--no-embed", "--no-progress", stdout=open("/dev/null", "w"))
        except CommandError as exc:
            assert generated.spoiled, f"a clean file was refused: {exc}"
            assert f":{generated.spoiled[0]}: " in str(exc), str(exc)  # every problem is listed, in file order
            assert _snapshot() == before, "a refused file left rows behind"
            TRIED["refused_naming_the_problem"] += 1
            return
    assert not generated.spoiled, f"a file with line(s) {generated.spoiled} spoiled was loaded"
    kg = KnowledgeGraph.objects.get(name=f"fuzz-{TRIED['files_tried']}")
    assert kg.triples.count() == len(generated.rows)
    TRIED["loaded_whole"] += 1


@given(tsv_files())
@FUZZ
def test_generated_tsv_kg_files_load_whole_or_are_refused_naming_the_line(generated):
    _load_kg(generated, ".tsv")


@given(nt_files())
@FUZZ
def test_generated_ntriples_kg_files_load_whole_or_are_refused_naming_the_line(generated):
    _load_kg(generated, ".nt")


CSV_BAD = {"latin-1": "Douglas Adams,country of citizenship,Fran\xe7e".encode("latin-1"), "nul": b"Q42,P27\x00,Q145",
           "binary": b"\x89PNG\xff\xfe", "columns": b"Q42,P27", "long cell": b"Q42,P27," + b"x" * 2_000,
           "unknown entity": b"Q42,P27,Nowhere-land", "bad label": b"Q42,P27,Q145,maybe"}


@st.composite
def csv_line(draw):
    head, tail = draw(st.sampled_from(sorted(ENTITIES))), draw(st.sampled_from(sorted(ENTITIES)))
    relation = draw(st.sampled_from(sorted(RELATIONS)))
    names = [draw(st.sampled_from([head, ENTITIES[head]])), draw(st.sampled_from([relation, RELATIONS[relation]])),
             draw(st.sampled_from([tail, ENTITIES[tail]]))]
    return ",".join(f'"{n}"' if " " in n else n for n in names).encode(), (head, relation, tail)


@st.composite
def csv_files(draw):
    return _assemble(draw, csv_line(), CSV_BAD, header=draw(st.sampled_from([b"", b"head,relation,tail"])))


@pytest.fixture
def curator(make_user):
    make_world()
    return client_for(make_user, "curator")


@given(csv_files())
@FUZZ
def test_generated_flagged_triple_files_queue_whole_or_are_refused_naming_the_line(curator, generated):
    TRIED["files_tried"] += 1
    kg = KnowledgeGraph.objects.get(name="runs-kg")
    before = _snapshot()
    response = curator.post(reverse("api:task-import"), {"kg": kg.pk, "file": SimpleUploadedFile("flagged.csv", generated.body)})
    assert response.status_code < 500, response.content[:500]
    if generated.spoiled:
        body = response.content.decode()
        assert response.status_code == 400, (body[:500], generated)
        # An undecodable file is refused at its first bad byte, which need not be the first bad row.
        named = {row["line"] for row in response.json()["error"]["details"].get("rows", [])}
        assert named & set(generated.spoiled), (body[:500], generated)
        assert _snapshot() == before
        TRIED["refused_naming_the_problem"] += 1
        return
    assert response.status_code in (200, 201), (response.content[:500], generated)
    queued = {(t.head.external_id, t.relation.external_id, t.tail.external_id)
              for t in VerificationTask.objects.filter(kg=kg).select_related("head", "relation", "tail")}
    assert generated.rows <= queued
    TRIED["loaded_whole"] += 1


ENTRY = {"triple_text": "Douglas Adams country of citizenship United Kingdom", "relation_label": "country of citizenship",
         "trajectory": "Thought: look.\nFinal Answer: [Correct] [E1]", "lesson": "citizenship follows birthplace",
         "verdict": "correct", "status": "active", "provenance": "fuzz", "kg": "codex-s"}
JSON_VALUES = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5), st.just("a\x00b"), st.just("x" * 600),
                        st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


@st.composite
def bank_files(draw):
    """A bank export whose entries may have a field replaced by an arbitrary JSON value, or a broken file."""
    entries, clean = [], True
    for number in range(draw(st.integers(1, 4))):
        entry = {**ENTRY, "triple_text": f"{ENTRY['triple_text']} #{number} {draw(NAMES)}"}
        if draw(st.booleans()):
            field = draw(st.sampled_from(sorted(ENTRY)))
            value = draw(JSON_VALUES)
            entry[field] = value
            clean = clean and _acceptable(field, value)
        entries.append(entry)
    document = {"format": "kgv-memory-bank/1", "entries": entries}
    body = json.dumps(document).encode()
    spoil = draw(st.sampled_from(["none"] * 4 + ["latin-1", "truncated", "not an object", "wrong format"]))
    body = {"none": body, "latin-1": body.replace(b"Douglas", "Dougl\xe0s".encode("latin-1")), "truncated": body[:-7],
            "not an object": json.dumps(entries).encode(), "wrong format": body.replace(b"kgv-memory-bank/1", b"other")}[spoil]
    return body, clean and spoil == "none", entries


def _acceptable(field: str, value) -> bool:
    """Whether the importer must accept this value in this field (the oracle, written from the file format)."""
    if field == "verdict":
        return value in ("correct", "incorrect", "not_enough_evidence")
    if field == "status":
        return value in ("active", "retired")
    if not value:  # an empty optional field reads as empty text; a required one is missing
        return field not in ("triple_text", "trajectory")
    if not isinstance(value, str) or "\x00" in value:
        return False
    return not ((field in ("relation_label", "provenance") and len(value) > 500) or (field == "kg" and len(value) > 100))


@given(bank_files())
@FUZZ
def test_generated_memory_bank_files_import_whole_or_are_refused(generated):
    body, clean, entries = generated
    TRIED["files_tried"] += 1
    before = _snapshot()
    present = set(MemoryEntry.objects.values_list("triple_text", "trajectory"))
    with tempfile.TemporaryDirectory() as tmp:
        path = _write(Path(tmp), "bank.json", body)
        try:
            call_command("memory_bank", "import", str(path), stdout=open("/dev/null", "w"))
        except CommandError as exc:
            assert not clean, f"a clean bank was refused: {exc}"
            assert "nothing was imported" in str(exc)
            assert _snapshot() == before
            TRIED["refused_naming_the_problem"] += 1
            return
    assert clean, "a spoiled bank was imported"
    new = {(e["triple_text"], e["trajectory"]) for e in entries} - present
    assert MemoryEntry.objects.count() == before[3] + len(new)
    TRIED["loaded_whole"] += 1
