"""Claims read from a file: plain text (one claim per line), CSV (a ``claim`` or ``text`` column, optional ``label``
and ``category``) or JSON Lines (``{"claim": …, "label": true, "category": "multi-hop"}``, the benchmark format).

Every row is checked on its own: the rows that can be taken are returned with the problems of the others, each
naming its line, so one bad row never loses the rest (the page and the API report them).
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass

from verifier.json_input import JSONRefused, parse_json
from verifier.kg.textfile import NUL_PROBLEM
from verifier.models import Claim

MAX_CLAIM_CHARS = 1000
MAX_FILE_CLAIMS = 1000
SUFFIXES = (".txt", ".csv", ".jsonl")
TRUE, FALSE = ("true", "1", "yes", "supported"), ("false", "0", "no", "refuted")


@dataclass(frozen=True)
class ClaimRow:
    line: int
    text: str
    label: bool | None = None
    category: str = ""
    entities: tuple[str, ...] = ()


@dataclass
class ReadClaims:
    rows: list[ClaimRow]
    problems: list[str]  # "line 4: …", in file order


class ClaimFileError(ValueError):
    """A file that holds no claims at all, or not in a format claims are read from."""


def _label(value) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if not text:
        return None
    if text in TRUE or text in FALSE:
        return text in TRUE
    raise ValueError(f"label {value!r} is not true or false")


def checked(line: int, text, label=None, category="", entities=()) -> ClaimRow:
    """One row, or ValueError saying what is wrong with it."""
    if not isinstance(text, str) or not " ".join(text.split()):
        raise ValueError("the claim is empty")
    text = " ".join(text.split())
    if len(text) > MAX_CLAIM_CHARS:
        raise ValueError(f"the claim has {len(text)} characters, at most {MAX_CLAIM_CHARS}: split it")
    category = (category or "").strip() if isinstance(category, str) else category
    if category and category not in Claim.Category.values:
        raise ValueError(f"unknown category {category!r}: one of {', '.join(Claim.Category.values)}")
    if not isinstance(entities, list | tuple) or not all(isinstance(e, str) for e in entities):
        raise ValueError("'entities' must be a list of names")
    return ClaimRow(line, text, _label(label), category, tuple(entities))


# Each reader yields (line, the row's fields for ``checked``, or the ValueError that makes the row unreadable).
def _text_rows(text: str):
    for number, raw in enumerate(text.splitlines(), start=1):
        if raw.strip():
            yield number, {"text": raw}


def _csv_rows(text: str):
    reader = csv.DictReader(io.StringIO(text))
    columns = {name.strip().lower(): name for name in reader.fieldnames or [] if name}
    column = columns.get("claim") or columns.get("text")
    if column is None:
        raise ClaimFileError(f"a claims CSV needs a 'claim' or 'text' column (its header: {', '.join(columns) or 'none'})")
    for row in reader:
        values = {name.strip().lower(): value for name, value in row.items() if isinstance(name, str)}
        if any(isinstance(value, str) and value.strip() for value in values.values()):
            yield reader.line_num, {"text": row[column], "label": values.get("label"), "category": values.get("category") or ""}


def _jsonl_rows(text: str):
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            data = parse_json(raw)
        except json.JSONDecodeError as error:
            yield number, ValueError(f"not JSON ({error.msg})")
            continue
        except JSONRefused as error:  # too deep, a number or a character no field can hold
            yield number, error
            continue
        if not isinstance(data, dict):
            yield number, ValueError("not a JSON object")
            continue
        yield number, {"text": data.get("claim", data.get("text")), "label": data.get("label"),
                       "category": data.get("category") or "", "entities": data.get("entities") or ()}


READERS = {".txt": _text_rows, ".csv": _csv_rows, ".jsonl": _jsonl_rows}


def read_claims_text(name: str, text: str) -> ReadClaims:
    """The claims of a file called ``name`` (its suffix decides the format) holding ``text``."""
    suffix = next((s for s in SUFFIXES if name.lower().endswith(s)), None)
    if suffix is None:
        raise ClaimFileError(f"{name}: claims are read from {', '.join(SUFFIXES)} files")
    text, spoiled = _without_nul_lines(text.lstrip("\ufeff"))
    rows, numbered = [], [(number, NUL_PROBLEM) for number in spoiled]
    for number, fields in READERS[suffix](text):
        try:
            if isinstance(fields, ValueError):
                raise fields
            rows.append(checked(number, **fields))
        except ValueError as error:
            numbered.append((number, str(error)))
    problems = [f"line {number}: {message}" for number, message in sorted(numbered, key=lambda pair: pair[0])]
    if len(rows) > MAX_FILE_CLAIMS:
        raise ClaimFileError(f"{name} holds {len(rows)} claims; at most {MAX_FILE_CLAIMS} per file")
    if not rows:
        raise ClaimFileError(f"{name} holds no claim that can be taken" + (f" ({problems[0]})" if problems else ""))
    return ReadClaims(rows, problems)


def _without_nul_lines(text: str) -> tuple[str, list[int]]:
    """The text with every line holding a NUL byte emptied (a problem of its own, as in every importer: never stripped
    silently), and those lines' numbers."""
    lines = text.splitlines(keepends=True)
    spoiled = [number for number, line in enumerate(lines, start=1) if "\x00" in line]
    if not spoiled:
        return text, []
    return "".join(line[len(line.splitlines()[0]):] if "\x00" in line else line for line in lines), spoiled


def read_claims_upload(upload) -> ReadClaims:
    """An uploaded file's claims; a file that is not UTF-8 text is refused whole."""
    try:
        text = upload.read().decode("utf-8")
    except UnicodeDecodeError:
        raise ClaimFileError(f"{upload.name} is not UTF-8 text") from None
    return read_claims_text(upload.name or "claims.txt", text)
