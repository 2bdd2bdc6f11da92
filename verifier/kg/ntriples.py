"""A strict, line-oriented N-Triples reader (W3C N-Triples 1.1) that reports every bad line.

Wikidata IRIs are shortened to their ids (``http://www.wikidata.org/entity/Q42`` → ``Q42``,
``…/prop/direct/P31`` → ``P31``) so an N-Triples export of Wikidata lines up with CoDEx ids; other IRIs
stay whole.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from verifier.kg.textfile import MAX_ID_CHARS, Problem, clipped, text_lines

RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
LABEL_PREDICATES = {
    "http://www.w3.org/2000/01/rdf-schema#label",
    "http://www.w3.org/2004/02/skos/core#prefLabel",
    "http://schema.org/name",
}
DESCRIPTION_PREDICATES = {"http://schema.org/description", "http://www.w3.org/2000/01/rdf-schema#comment"}
ALIAS_PREDICATES = {"http://www.w3.org/2004/02/skos/core#altLabel"}
TYPE_PREDICATES = {RDF_TYPE, "P31"}

_WIKIDATA_PREFIXES = (
    "http://www.wikidata.org/entity/",
    "http://www.wikidata.org/prop/direct/",
    "https://www.wikidata.org/wiki/",
)

_IRI = r"<([^<>\"{}|^`\\\x00-\x20]*)>"
_BNODE = r"_:([A-Za-z0-9_][A-Za-z0-9_.\-]*)"
_LITERAL = r'"((?:[^"\\\n\r]|\\.)*)"(?:@([a-zA-Z]+(?:-[a-zA-Z0-9]+)*)|\^\^' + _IRI + r")?"
_LINE = re.compile(
    rf"^\s*(?:{_IRI}|{_BNODE})\s*{_IRI}\s*(?:{_IRI}|{_BNODE}|{_LITERAL})\s*\.\s*(?:#.*)?$"
)
_ESCAPES = {"t": "\t", "b": "\b", "n": "\n", "r": "\r", "f": "\f", '"': '"', "'": "'", "\\": "\\"}
_ESCAPE = re.compile(r"\\(u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|[tbnrf\"'\\])")


class _BadEscape(ValueError):
    pass


def _unescape(text: str) -> str:
    def replace(match: re.Match) -> str:
        code = match.group(1)
        if code[0] not in "uU":
            return _ESCAPES[code]
        point = int(code[1:], 16)
        if point == 0 or point > 0x10FFFF or 0xD800 <= point <= 0xDFFF:
            raise _BadEscape(f"\\{code} is not a character a term may hold")
        return chr(point)

    return _ESCAPE.sub(replace, text)


def compact(iri: str) -> str:
    for prefix in _WIKIDATA_PREFIXES:
        if iri.startswith(prefix):
            return iri[len(prefix):]
    return iri


_WIKIDATA_ID = re.compile(r"^[QP][1-9][0-9]*$")
_ABSOLUTE_IRI = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:[^<>\"{}|^`\\\x00-\x20]+$")


def expand(external_id: str, *, relation: bool = False) -> str | None:
    """The IRI an id stands for, as ``compact`` reads them: a Wikidata id back to its entity (or, for a relation, its
    direct-property) IRI, an id that is an absolute IRI as it is; None for any other id, which names no IRI."""
    if _WIKIDATA_ID.match(external_id) and (external_id[0] == "P" or not relation):
        return f"{_WIKIDATA_PREFIXES[1 if relation else 0]}{external_id}"
    return external_id if _ABSOLUTE_IRI.match(external_id) else None


def kgv_urn(*parts: object) -> str:
    """A name KGV gives what no URL serves: ``urn:kgv:`` and the parts, each percent-encoded, joined by colons."""
    return "urn:kgv:" + ":".join(quote(str(part), safe="") for part in parts)


def term_iri(kg_name: str, external_id: str, *, relation: bool = False) -> str:
    """The IRI of a KG's entity or relation in what KGV exports: the IRI its id stands for (``expand``), else a name
    that says which KG's term it is (``urn:kgv:kg:<kg>:entity:<id>``), the same in every export and never a URL that
    does not resolve."""
    return expand(external_id, relation=relation) or kgv_urn("kg", kg_name, "relation" if relation else "entity", external_id)


@dataclass
class ParsedGraph:
    triples: list[tuple[str, str, str]] = field(default_factory=list)
    entities: dict[str, dict] = field(default_factory=dict)
    types: set[str] = field(default_factory=set)
    relation_labels: dict[str, str] = field(default_factory=dict)
    ignored_literals: int = 0

    def entity(self, external_id: str) -> dict:
        return self.entities.setdefault(
            external_id, {"external_id": external_id, "label": "", "description": "", "aliases": [], "types": []}
        )


def _prefer(current: str, new: str, lang: str | None) -> bool:
    """Keep English (or untagged) text over other languages."""
    return not current or (lang or "en").lower().startswith("en")


def read_graph(path: Path, *, problems: list[Problem]) -> ParsedGraph:
    graph = ParsedGraph()
    for number, raw in text_lines(path, problems):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _LINE.match(line)
        if match is None:
            problems.append(Problem(path, number, f"not an N-Triples statement: {line[:120]!r}"))
            continue
        s_iri, s_bnode, predicate, o_iri, o_bnode, o_text, o_lang, _datatype = match.groups()
        try:
            subject = compact(_unescape(s_iri)) if s_iri is not None else f"_:{s_bnode}"
            predicate = compact(_unescape(predicate))
            obj = (compact(_unescape(o_iri)) if o_iri is not None else f"_:{o_bnode}") if o_text is None else ""
            text = _unescape(o_text) if o_text is not None else ""
        except _BadEscape as exc:
            problems.append(Problem(path, number, str(exc)))
            continue
        too_long = next((i for i in (subject, predicate, obj) if len(i) > MAX_ID_CHARS), None)
        if too_long is not None:
            problems.append(Problem(path, number, f"an IRI is {len(too_long):,} characters long; at most {MAX_ID_CHARS} are stored"))
            continue
        if o_text is None:
            if predicate in TYPE_PREDICATES:
                graph.entity(subject)["types"].append(obj)
                graph.types.add(obj)
            else:
                graph.triples.append((subject, predicate, obj))
            continue
        record = graph.entity(subject)
        if predicate in LABEL_PREDICATES:
            if _prefer(record["label"], text, o_lang):
                record["label"] = clipped(text)
        elif predicate in DESCRIPTION_PREDICATES:
            if _prefer(record["description"], text, o_lang):
                record["description"] = text
        elif predicate in ALIAS_PREDICATES:
            if (o_lang or "en").lower().startswith("en"):
                record["aliases"].append(clipped(text))
        else:
            graph.ignored_literals += 1

    # Subjects described with a label that are used as predicates are relations, not entities.
    predicates = {p for _, p, _ in graph.triples}
    for pid in predicates:
        described = graph.entities.pop(pid, None)
        graph.relation_labels[pid] = described["label"] if described else ""
    return graph
