"""Readers turning KG files on disk into one neutral shape that the loader bulk-copies into Postgres.

Supported: the CoDEx-S folder, the FB15k-237 folder, a TSV file of triples and an N-Triples file.
Readers stream triples (FB15k-237 has 272k of them) and collect every malformed line with its file and
line number in ``source.problems`` instead of stopping at the first; the loader refuses to commit while
there are problems, so nothing half-imported stays.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from verifier.errors import ApplicationError
from verifier.json_input import JSONRefused, parse_json
from verifier.kg import ntriples
from verifier.kg.sparql import ITEM_ID
from verifier.kg.textfile import MAX_ID_CHARS, Problem, clipped, read_text, text_lines


class SourceError(ApplicationError):
    """The path given to the importer is not a KG this reader understands."""


@dataclass
class TypeRecord:
    external_id: str
    label: str = ""
    description: str = ""


@dataclass
class EntityRecord:
    external_id: str
    label: str = ""
    description: str = ""
    aliases: list[str] = field(default_factory=list)
    types: list[str] = field(default_factory=list)
    same_as: str = ""  # the Wikidata id of the same thing, where the id is another kind (Entity.same_as)


@dataclass
class RelationRecord:
    external_id: str
    label: str = ""
    description: str = ""
    aliases: list[str] = field(default_factory=list)


@dataclass
class PassageRecord:
    entity_id: str
    text: str
    source: str = "wikipedia"
    url: str = ""


@dataclass
class KGSource:
    """Everything one import brings. ``triples`` is a zero-argument callable returning a fresh iterator
    of (head, relation, tail) external ids, so large files are streamed, never held in memory."""

    name: str
    title: str
    description: str
    triples: Callable[[], Iterator[tuple[str, str, str]]]
    triple_files: list[Path] = field(default_factory=list)
    types: list[TypeRecord] = field(default_factory=list)
    entities: list[EntityRecord] = field(default_factory=list)
    relations: list[RelationRecord] = field(default_factory=list)
    passages: list[PassageRecord] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


# --------------------------------------------------------------------------------------------------
# Line readers shared by the formats
# --------------------------------------------------------------------------------------------------


def _tab_rows(path: Path, columns: int, problems: list[Problem], *, at_least: bool = False) -> Iterator[list[str]]:
    """Rows of a tab-separated file; blank lines skipped, wrong column counts and over-long ids reported."""
    for number, line in text_lines(path, problems):
        if not line.strip():
            continue
        parts = line.split("\t", columns - 1 if at_least else -1)
        if len(parts) != columns or any(not p.strip() for p in parts[:columns]):
            message = f"expected {columns} tab-separated non-empty fields, got {len(parts)}: {line[:120]!r}"
            problems.append(Problem(path, number, message))
            continue
        parts = [p.strip() for p in parts]
        too_long = next((p for p in (parts if columns == 3 and not at_least else parts[:1]) if len(p) > MAX_ID_CHARS), None)
        if too_long is not None:
            problems.append(Problem(path, number, f"an id is {len(too_long):,} characters long; at most {MAX_ID_CHARS} are stored"))
            continue
        yield parts


def _triple_stream(paths: list[Path], problems: list[Problem]) -> Callable[[], Iterator[tuple[str, str, str]]]:
    def stream() -> Iterator[tuple[str, str, str]]:
        for path in paths:
            yield from map(tuple, _tab_rows(path, 3, problems))

    return stream


def _read_json(path: Path, problems: list[Problem], *, values: type = dict) -> dict:
    """A JSON object keyed by id whose values are all ``values`` (objects, or lists); anything else is a
    problem (and an empty object)."""
    text, problem = read_text(path)
    if problem is not None:
        problems.append(problem)
        return {}
    try:
        data = parse_json(text)
    except json.JSONDecodeError as exc:
        problems.append(Problem(path, exc.lineno, f"invalid JSON: {exc.msg}"))
        return {}
    except JSONRefused as exc:  # nested too deep, a number or a character the store cannot hold
        problems.append(Problem(path, 1, f"refused JSON: {exc}"))
        return {}
    if not isinstance(data, dict) or not all(isinstance(v, values) for v in data.values()):
        problems.append(Problem(path, 1, f"expected a JSON object of {'lists' if values is list else 'objects'}, keyed by id"))
        return {}
    return data


def _require(path: Path) -> Path:
    if not path.exists():
        raise SourceError(f"{path} is missing")
    return path


# --------------------------------------------------------------------------------------------------
# Formats
# --------------------------------------------------------------------------------------------------


def read_codex(folder: Path, *, name: str = "codex-s") -> KGSource:
    """CoDEx-S: Wikidata ids; names, Wikipedia extracts, Wikidata terms, relation labels and types."""
    problems: list[Problem] = []
    train = _require(folder / "triples" / "train.txt")

    type_rows = _read_json(_require(folder / "types" / "types.json"), problems)
    types = [
        TypeRecord(tid, row.get("label", ""), row.get("description", ""))
        for tid, row in type_rows.items()
    ]
    entity_types = _read_json(_require(folder / "types" / "entity2types.json"), problems, values=list)

    entities: dict[str, EntityRecord] = {}
    for qid, label in _tab_rows(_require(folder / "entities" / "entity2name.txt"), 2, problems):
        entities[qid] = EntityRecord(qid, clipped(label), types=list(entity_types.get(qid, [])))

    wikipedia_urls: dict[str, str] = {}
    terms_path = folder / "entities" / "wikidata_terms.jsonl"
    if terms_path.exists():
        for number, line in text_lines(terms_path, problems):
            if not line.strip():
                continue
            try:
                row = parse_json(line)
                record = entities.setdefault(row["id"], EntityRecord(row["id"]))
            except (ValueError, KeyError, TypeError) as exc:  # not JSON, refused by its bounds, or no id
                problems.append(Problem(terms_path, number, f"invalid JSON line: {exc}"))
                continue
            record.label = record.label or row.get("label") or ""
            record.description = row.get("description") or record.description
            record.aliases = [a for a in row.get("aliases") or [] if a]
            wikipedia_urls[row["id"]] = row.get("wikipedia") or ""

    passages = [
        PassageRecord(qid, text, "wikipedia", wikipedia_urls.get(qid, ""))
        for qid, text in _tab_rows(_require(folder / "entities" / "entity2des.txt"), 2, problems, at_least=True)
    ]

    relation_rows = _read_json(_require(folder / "relations.json"), problems)
    relations = [
        RelationRecord(pid, row.get("label", ""), row.get("description", ""))
        for pid, row in relation_rows.items()
    ]
    return KGSource(
        name=name,
        title="CoDEx-S",
        description="CoDEx-S (Wikidata-based KG completion benchmark): the train split as the KG.",
        triples=_triple_stream([train], problems),
        triple_files=[train],
        types=types,
        entities=list(entities.values()),
        relations=relations,
        passages=passages,
        problems=problems,
    )


# Readable names for FB15k-237's relations: ``relation path<TAB>label<TAB>what links head to tail``. The dataset's
# own phrases spell out the Freebase path ("film actor film. film performance film"); a curator (and a model)
# reads a claim better as "appeared in film". The dataset's phrase stays an alias, so files naming a relation
# by it still resolve.
FB15K_RELATIONS = Path(__file__).resolve().parents[1] / "data" / "fb15k-237.relations.tsv"


def read_fb15k(folder: Path, *, name: str = "fb15k-237") -> KGSource:
    """FB15k-237: Freebase mids; names, relation labels (readable, the dataset's phrases as aliases) and
    Wikidata labels/descriptions/aliases."""
    problems: list[Problem] = []
    train = _require(folder / "train.txt")

    entities: dict[str, EntityRecord] = {}
    for mid, label in _tab_rows(_require(folder / "entity2text.txt"), 2, problems, at_least=True):
        entities[mid] = EntityRecord(mid, clipped(label))
    wikidata_path = folder / "entity2wikidata.json"
    if wikidata_path.exists():
        for mid, row in _read_json(wikidata_path, problems).items():
            record = entities.setdefault(mid, EntityRecord(mid))
            record.label = record.label or row.get("label") or ""
            record.description = row.get("description") or ""
            record.aliases = [a for a in row.get("alternatives") or [] if a and a != record.label]
            wikidata_id = row.get("wikidata_id") or ""
            record.same_as = wikidata_id if isinstance(wikidata_id, str) and ITEM_ID.fullmatch(wikidata_id) else ""

    named = {rid: (label, description) for rid, label, description in _tab_rows(FB15K_RELATIONS, 3, problems)}
    relations = []
    for rid, phrase in _tab_rows(_require(folder / "relation2text.txt"), 2, problems, at_least=True):
        phrase = clipped(phrase)
        label, description = named.get(rid, (phrase, ""))
        relations.append(RelationRecord(rid, label, description, [phrase] if label != phrase else []))
    return KGSource(
        name=name,
        title="FB15k-237",
        description="FB15k-237 (Freebase subset, Toutanova & Chen): the train split as the KG.",
        triples=_triple_stream([train], problems),
        triple_files=[train],
        entities=list(entities.values()),
        relations=relations,
        problems=problems,
    )


def read_tsv_triples(path: Path, *, name: str) -> KGSource:
    """A file of ``head<TAB>relation<TAB>tail`` lines; ids double as labels."""
    problems: list[Problem] = []
    return KGSource(
        name=name,
        title=name,
        description=f"Triples imported from {path.name}",
        triples=_triple_stream([_require(path)], problems),
        triple_files=[path],
        problems=problems,
    )


def read_ntriples(path: Path, *, name: str) -> KGSource:
    """An N-Triples file: IRI objects become triples; labels, descriptions, aliases and rdf:type
    become entity attributes; other literals are ignored (and counted in the report)."""
    problems: list[Problem] = []
    parsed = ntriples.read_graph(_require(path), problems=problems)
    return KGSource(
        name=name,
        title=name,
        description=f"N-Triples imported from {path.name}",
        triples=lambda: iter(parsed.triples),
        triple_files=[path],
        types=[TypeRecord(t) for t in sorted(parsed.types)],
        entities=[EntityRecord(**fields) for fields in parsed.entities.values()],
        relations=[RelationRecord(r, label) for r, label in parsed.relation_labels.items()],
        problems=problems,
    )


KG_NAME = re.compile(r"^[-a-zA-Z0-9_]{1,100}$")  # a KG's name is a slug (it appears in URLs)


def detect_source(path: Path, *, name: str | None = None) -> KGSource:
    """Pick the reader for a path: a known dataset folder, ``.nt`` or a TSV triples file."""
    source = _reader(path, name=name)
    if not KG_NAME.match(source.name):
        raise SourceError(f"{source.name[:120]!r} cannot name a KG: use letters, digits, - and _ (at most 100); see --name")
    return source


def _reader(path: Path, *, name: str | None) -> KGSource:
    if path.is_dir():
        if (path / "triples" / "train.txt").exists() and (path / "relations.json").exists():
            return read_codex(path, name=name or "codex-s")
        if (path / "train.txt").exists() and (path / "entity2text.txt").exists():
            return read_fb15k(path, name=name or "fb15k-237")
        raise SourceError(f"{path} is a folder but neither a CoDEx-S nor an FB15k-237 folder")
    if not path.exists():
        raise SourceError(f"{path} does not exist")
    default_name = path.stem.replace("_", "-").lower()
    if path.suffix.lower() == ".nt":
        return read_ntriples(path, name=name or default_name)
    if path.suffix.lower() in {".tsv", ".txt"}:
        return read_tsv_triples(path, name=name or default_name)
    raise SourceError(f"{path}: unknown format (expected a dataset folder, .nt, .tsv or .txt)")
