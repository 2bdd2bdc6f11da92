"""A KGBackend over a SPARQL 1.1 endpoint through SPARQLWrapper, with Wikidata conventions by default.

Ids are short in and out (``Q42``, ``P27``); IRIs are built from configured prefixes. Nothing a caller
passes reaches a query as raw text: free text goes through ``sparql_literal`` and ids must match a strict
pattern before ``_iri`` puts them between ``<...>``. Every failure of the endpoint (down, slow, HTTP
errors, garbage) becomes one ``BackendError`` line naming the endpoint, after retries where they may help.
"""

from __future__ import annotations

import ast
import http.client
import json
import logging
import re
import urllib.error
from collections.abc import Iterable
from contextlib import closing, suppress
from urllib.parse import quote_plus, urlsplit

from SPARQLWrapper import GET, JSON, POST, SELECT, SPARQLWrapper
from SPARQLWrapper.SPARQLExceptions import EndPointInternalError, QueryBadFormed, SPARQLWrapperException

from verifier.kg.base import (
    BackendError,
    Candidate,
    Edge,
    EntityProfile,
    KGPath,
    MatchKind,
    PathStep,
    Ref,
    RelationProfile,
    ends,
    shared_within,
)
from verifier.retrying import Transient, call_with_retries, retry_after

logger = logging.getLogger(__name__)

WIKIDATA_ENDPOINT = "https://query.wikidata.org/sparql"
DEFAULT_USER_AGENT = "KGV/0.1 (knowledge-graph verification workbench)"
WIKIDATA_ENTITY = "http://www.wikidata.org/entity/"
WIKIDATA_DIRECT = "http://www.wikidata.org/prop/direct/"
INSTANCE_OF, SUBJECT_TYPE_CONSTRAINT, VALUE_TYPE_CONSTRAINT = "P31", "Q21503250", "Q21510865"

ITEM_ID = re.compile(r"Q[1-9][0-9]{0,11}")
PROPERTY_ID = re.compile(r"P[1-9][0-9]{0,11}")
NODE_ID = re.compile(r"[PQ][1-9][0-9]{0,11}")  # a path or edge may pass through a property entity
_LANGUAGE = re.compile(r"[a-z]{1,8}(-[a-z0-9]{1,8})*")
# Characters that may not appear in an IRIREF; a configured prefix containing one is refused.
_IRI_PREFIX = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:[^\s<>\"{}|^`\\]*")
# p:/ps:/pq: (statement, statement value, qualifier) carry Wikidata's property constraints.
_PREFIXES = (
    "PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>\nPREFIX schema: <http://schema.org/>\n"
    "PREFIX skos: <http://www.w3.org/2004/02/skos/core#>\nPREFIX p: <http://www.wikidata.org/prop/>\n"
    "PREFIX ps: <http://www.wikidata.org/prop/statement/>\nPREFIX pq: <http://www.wikidata.org/prop/qualifier/>\n"
)
_ECHAR = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}
# Wikidata caches GET answers, but URLs longer than this are refused by some proxies: POST those.
_MAX_GET_QUERY = 2000
_RETRY_STATUS = {429, 502, 503, 504}
_DERIVED_SAMPLE, _DERIVED_TYPES = 200, 5
# Excluded edges beyond this many are only filtered in Python, to keep the query text bounded.
_MAX_EXCLUDE_IN_QUERY = 25
_LABEL_BATCH = 200

Row = dict[str, str]


def sparql_literal(text: str, language: str | None = None) -> str:
    """A SPARQL string literal for any text; the text can never end the literal or change the query.

    Quotes, backslashes and line breaks use ECHAR escapes and other control characters UCHAR escapes.
    Some parsers expand ``\\uXXXX`` before tokenizing the query, so a ``u``/``U`` right after an
    escaped backslash is itself written as UCHAR: no reading of the result yields a live escape.
    """
    out: list[str] = []
    after_backslash = False
    for char in text:
        code = ord(char)
        if char in _ECHAR:
            out.append(_ECHAR[char])
        elif 0xD800 <= code <= 0xDFFF:  # a lone surrogate cannot be sent as UTF-8
            out.append("\ufffd")
        elif code < 0x20 or 0x7F <= code <= 0x9F or (after_backslash and char in "uU"):
            out.append(f"\\u{code:04X}")
        else:
            out.append(char)
        after_backslash = char == "\\"
    literal = '"' + "".join(out) + '"'
    if language is not None:
        if not _LANGUAGE.fullmatch(language):
            raise ValueError(f"not a language tag: {language!r}")
        literal += "@" + language
    return literal


class _Refused(Exception):
    """An attempt that another cannot fix (a malformed query, a refused request, a malformed answer)."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


class SparqlBackend:
    """A KGBackend answering from a SPARQL endpoint; ``entity_prefix``/``property_prefix`` map short ids
    to entity IRIs and direct-property (``wdt:``) IRIs. Thread-safe: every query uses its own wrapper."""

    def __init__(self, endpoint: str = WIKIDATA_ENDPOINT, *, user_agent: str = DEFAULT_USER_AGENT,
                 timeout: float = 10.0, retries: int = 3, backoff: float = 1.0, max_wait: float = 30.0,
                 language: str = "en", entity_prefix: str = WIKIDATA_ENTITY, property_prefix: str = WIKIDATA_DIRECT,
                 data_version: str = "", name: str = "wikidata") -> None:
        parts = urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"SPARQL endpoint must be an http(s) URL, got {endpoint!r}")
        if not (_IRI_PREFIX.fullmatch(entity_prefix) and _IRI_PREFIX.fullmatch(property_prefix)):
            raise ValueError(f"not usable IRI prefixes: {entity_prefix!r}, {property_prefix!r}")
        if not user_agent or not user_agent.isprintable():  # Wikidata refuses requests without one
            raise ValueError(f"not a usable User-Agent: {user_agent!r}")
        if not _LANGUAGE.fullmatch(language.lower()):
            raise ValueError(f"not a language tag: {language!r}")
        if timeout <= 0 or retries < 0 or backoff < 0 or max_wait < 0:
            raise ValueError("timeout must be positive; retries, backoff and max_wait not negative")
        self.endpoint, self.user_agent, self.name = endpoint, user_agent, name
        self.timeout, self.retries, self.backoff, self.max_wait = timeout, retries, backoff, max_wait
        # Endpoints store language tags lower-cased (Wikidata, Oxigraph); LANG() compares exactly.
        self.language = language.lower()
        self.entity_prefix, self.property_prefix, self.data_version = entity_prefix, property_prefix, data_version

    @property
    def version(self) -> str:
        return f"sparql:{self.endpoint}" + (f"@{self.data_version}" if self.data_version else "")

    # ------------------------------------------------------------------------------------ names

    def find_entities(self, text: str, *, limit: int = 5) -> list[Candidate]:
        return self._find(text, limit, "Q", ITEM_ID)

    def find_relations(self, text: str, *, limit: int = 5) -> list[Candidate]:
        return self._find(text, limit, "P", PROPERTY_ID)

    def _find(self, text: str, limit: int, kind: str, pattern: re.Pattern[str]) -> list[Candidate]:
        text = text.strip()  # only the ends: inner whitespace (even a newline) may be part of a label
        if not text or limit < 1:
            return []
        if pattern.fullmatch(text.upper()):
            by_id = f"VALUES ?e {{ {self._iri(text.upper(), pattern)} }} FILTER EXISTS {{ ?e ?anyp ?anyo }}"
            rows = self._candidate_rows(by_id, kind, 1)
            if rows and (candidate := self._candidate(rows[0], kind, "id", 1.0)):
                return [candidate]
        found: dict[str, Candidate] = {}
        variants = " ".join(sparql_literal(v, self.language) for v in _case_variants(text))
        stages: tuple[tuple[MatchKind, str, float], ...] = (("exact", "rdfs:label", 1.0), ("alias", "skos:altLabel", 0.95))
        for match, predicate, score in stages:
            for row in self._candidate_rows(f"VALUES ?m {{ {variants} }} ?e {predicate} ?m .", kind, 2 * limit + 5):
                candidate = self._candidate(row, kind, match, score)
                if candidate and candidate.id not in found:
                    found[candidate.id] = candidate
        if not found and len(text) >= 2:
            # Fallback only: CONTAINS scans every label, which a large endpoint may not finish in time.
            needle = sparql_literal(text.lower())
            fuzzy = f"?e rdfs:label ?m . FILTER({self._lang('?m')} && CONTAINS(LCASE(STR(?m)), {needle}))"
            for row in self._candidate_rows(fuzzy, kind, 4 * limit + 10):
                label = row.get("m", "")
                exact = label.casefold() == text.casefold()  # exact, in a casing the variants missed
                score = 1.0 if exact else round(0.8 * min(1.0, len(text) / max(len(label), 1)), 3)
                candidate = self._candidate(row, kind, "exact" if exact else "fuzzy", score)
                if candidate and (candidate.id not in found or found[candidate.id].score < candidate.score):
                    found[candidate.id] = candidate
        # Lower ids first among equals: on Wikidata they are usually the better-known entities.
        return sorted(found.values(), key=lambda c: (-c.score, len(c.id), c.id))[:limit]

    def _candidate_rows(self, match_pattern: str, kind: str, limit: int) -> list[Row]:
        return self._select(f"""{_PREFIXES}SELECT ?e ?m ?l ?d WHERE {{
  {match_pattern}
  FILTER(isIRI(?e) && STRSTARTS(STR(?e), {sparql_literal(self.entity_prefix + kind)}))
  OPTIONAL {{ ?e rdfs:label ?l . FILTER({self._lang('?l')}) }}
  OPTIONAL {{ ?e schema:description ?d . FILTER({self._lang('?d')}) }}
}} LIMIT {int(limit)}""")

    def _candidate(self, row: Row, kind: str, match: MatchKind, score: float) -> Candidate | None:
        entity_id = self._short(row.get("e", ""), self.entity_prefix, ITEM_ID if kind == "Q" else PROPERTY_ID)
        if entity_id is None:
            return None
        return Candidate(entity_id, row.get("l", ""), row.get("d", ""), match, score)

    # --------------------------------------------------------------------------------- profiles

    def entity(self, entity_id: str) -> EntityProfile | None:
        node = self._iri(entity_id, NODE_ID)
        rows = self._select(f"""{_PREFIXES}SELECT ?l ?d ?a ?t ?tl ?any WHERE {{
  {self._terms(node)}
  UNION {{ {node} {self._direct(INSTANCE_OF)} ?t . FILTER(isIRI(?t))
          OPTIONAL {{ ?t rdfs:label ?tl . FILTER({self._lang('?tl')}) }} }}
  UNION {{ SELECT ?any WHERE {{ {{ {node} ?anyp ?any }} UNION {{ ?any ?anyp {node} }} }} LIMIT 1 }}
}} LIMIT 2000""")
        if not rows:
            return None
        label, description, aliases = _terms_of(rows)
        types = self._refs((row["t"], row.get("tl", "")) for row in rows if "t" in row)
        return EntityProfile(entity_id, label, description, aliases, types)

    def relation(self, relation_id: str) -> RelationProfile | None:
        node, direct = self._iri(relation_id, PROPERTY_ID), self._direct(relation_id)
        subject_kind, value_kind = self._iri(SUBJECT_TYPE_CONSTRAINT, ITEM_ID), self._iri(VALUE_TYPE_CONSTRAINT, ITEM_ID)
        rows = self._select(f"""{_PREFIXES}SELECT ?l ?d ?a ?kind ?c ?cl ?any WHERE {{
  {self._terms(node)}
  UNION {{ {node} p:P2302 ?st . ?st ps:P2302 ?kind . ?st pq:P2308 ?c .
          FILTER(?kind IN ({subject_kind}, {value_kind}) && isIRI(?c))
          OPTIONAL {{ ?c rdfs:label ?cl . FILTER({self._lang('?cl')}) }} }}
  UNION {{ SELECT ?any WHERE {{ {{ {node} ?anyp ?any }} UNION {{ ?anys {direct} ?any }} }} LIMIT 1 }}
}} LIMIT 2000""")
        if not rows:
            return None
        label, description, aliases = _terms_of(rows)
        declared = [row for row in rows if "kind" in row and "c" in row]
        domain = self._refs((r["c"], r.get("cl", "")) for r in declared if r["kind"] == self.entity_prefix + SUBJECT_TYPE_CONSTRAINT)
        range_ = self._refs((r["c"], r.get("cl", "")) for r in declared if r["kind"] == self.entity_prefix + VALUE_TYPE_CONSTRAINT)
        # A declared constraint is authoritative: we do not mix in observed types for the other side.
        source = "declared" if domain or range_ else ""
        if not source:
            domain, range_ = self._derived_schema(direct)
            source = "derived" if domain or range_ else ""
        return RelationProfile(relation_id, label, description, aliases, domain, range_, source)

    def _derived_schema(self, direct: str) -> tuple[list[Ref], list[Ref]]:
        """The most frequent P31 types among a bounded sample of the relation's subjects and objects."""
        rows = self._select(f"""{_PREFIXES}SELECT ?side ?t (SAMPLE(?tl0) AS ?tl) (COUNT(DISTINCT ?x) AS ?n) WHERE {{
  {{ SELECT ?s ?o WHERE {{ ?s {direct} ?o }} LIMIT {_DERIVED_SAMPLE} }}
  {{ ?s {self._direct(INSTANCE_OF)} ?t . BIND("domain" AS ?side) BIND(?s AS ?x) }}
  UNION {{ ?o {self._direct(INSTANCE_OF)} ?t . BIND("range" AS ?side) BIND(?o AS ?x) }}
  FILTER(isIRI(?t))
  OPTIONAL {{ ?t rdfs:label ?tl0 . FILTER({self._lang('?tl0')}) }}
}} GROUP BY ?side ?t ORDER BY ?side DESC(?n) ?t LIMIT 200""")
        sides: dict[str, list[tuple[str, str]]] = {"domain": [], "range": []}
        for row in rows:
            side = sides.get(row.get("side", ""))
            if side is not None and "t" in row and len(side) < _DERIVED_TYPES:
                side.append((row["t"], row.get("tl", "")))
        return self._refs(sides["domain"], sort=False), self._refs(sides["range"], sort=False)

    # ------------------------------------------------------------------------------------ edges

    def edges(self, entity_id: str, *, limit: int = 500) -> list[Edge]:
        node, limit = self._iri(entity_id, NODE_ID), int(limit)
        if limit < 1:
            return []
        keep = (f"FILTER(STRSTARTS(STR(?p), {sparql_literal(self.property_prefix)}) && isIRI(?o)"
                f" && STRSTARTS(STR(?o), {sparql_literal(self.entity_prefix)}))")
        # Two bounded sub-queries so a hub's millions of incoming edges cannot crowd out its own.
        rows = self._select(f"""SELECT ?out ?p ?o WHERE {{
  {{ SELECT ?p ?o (true AS ?out) WHERE {{ {node} ?p ?o . {keep} }} LIMIT {limit} }}
  UNION {{ SELECT ?p ?o (false AS ?out) WHERE {{ ?o ?p {node} . {keep} }} LIMIT {limit} }}
}}""")
        raw: dict[tuple[str, str, str], None] = {}
        for row in sorted(rows, key=lambda r: (r.get("out") != "true", r.get("p", ""), r.get("o", ""))):
            relation = self._short(row.get("p", ""), self.property_prefix, PROPERTY_ID)
            other = self._short(row.get("o", ""), self.entity_prefix, NODE_ID)
            if relation and other:
                raw[(entity_id, relation, other) if row.get("out") == "true" else (other, relation, entity_id)] = None
        triples = list(raw)[:limit]
        labels = self._labels(part for triple in triples for part in triple)
        edges = [_edge(triple, labels) for triple in triples]
        shared = shared_within(ends(edges))
        return [edge.marked(shared) for edge in edges]

    def paths(self, source_id: str, target_id: str, *, max_hops: int = 3, limit: int = 20,
              exclude: frozenset[tuple[str, str, str]] = frozenset()) -> list[KGPath]:
        """Shortest first; at most 3 hops (longer path queries do not finish on a large endpoint)."""
        source, target = self._iri(source_id, NODE_ID), self._iri(target_id, NODE_ID)
        if source_id == target_id:
            return []
        found: list[tuple[tuple[str, str, str, bool], ...]] = []
        for hops in range(1, min(max_hops, 3) + 1):
            if len(found) >= limit:
                break
            rows = self._select(self._path_query(source, target, hops, limit - len(found), exclude))
            walked = (self._walk(row, source_id, target_id, hops) for row in rows)
            found += sorted({w for w in walked if w and not any((h, r, t) in exclude for h, r, t, _ in w)})
        found = found[:limit]
        labels = self._labels(part for walk in found for step in walk for part in step[:3])
        shared = shared_within(ends(_edge(step[:3], labels) for walk in found for step in walk))
        return [KGPath(tuple(PathStep(_edge((h, r, t), labels).marked(shared), forward) for h, r, t, forward in walk))
                for walk in found]

    def _path_query(self, source: str, target: str, hops: int, limit: int,
                    exclude: frozenset[tuple[str, str, str]]) -> str:
        nodes = [source, *(f"?m{i}" for i in range(1, hops)), target]
        excluded = [(self._iri(h, NODE_ID), self._direct(r), self._iri(t, NODE_ID))
                    for h, r, t in sorted(exclude)
                    if NODE_ID.fullmatch(str(h)) and PROPERTY_ID.fullmatch(str(r)) and NODE_ID.fullmatch(str(t))]
        lines = []
        for i in range(1, hops + 1):
            a, b, p, f = nodes[i - 1], nodes[i], f"?p{i}", f"?f{i}"
            lines.append(f"{{ {a} {p} {b} . BIND(true AS {f}) }} UNION {{ {b} {p} {a} . BIND(false AS {f}) }}")
            lines.append(f"FILTER(STRSTARTS(STR({p}), {sparql_literal(self.property_prefix)}))")
            lines += [f"FILTER(!({p} = {er} && (({f} && {a} = {eh} && {b} = {et}) || (!{f} && {a} = {et} && {b} = {eh}))))"
                      for eh, er, et in excluded[:_MAX_EXCLUDE_IN_QUERY]]
        for m in nodes[1:-1]:  # a path never returns to its ends nor (3 hops) repeats its middle node
            lines.append(f"FILTER(isIRI({m}) && STRSTARTS(STR({m}), {sparql_literal(self.entity_prefix)})"
                         f" && {m} != {source} && {m} != {target})")
        if hops == 3:
            lines.append("FILTER(?m1 != ?m2)")
        variables = " ".join(f"?p{i} ?f{i}" for i in range(1, hops + 1)) + "".join(f" ?m{i}" for i in range(1, hops))
        body = "\n  ".join(lines)
        return f"SELECT DISTINCT {variables} WHERE {{\n  {body}\n}} LIMIT {int(limit)}"

    def _walk(self, row: Row, source_id: str, target_id: str, hops: int) -> tuple[tuple[str, str, str, bool], ...] | None:
        nodes = [source_id, *(self._short(row.get(f"m{i}", ""), self.entity_prefix, NODE_ID) for i in range(1, hops)), target_id]
        steps = []
        for i in range(1, hops + 1):
            relation = self._short(row.get(f"p{i}", ""), self.property_prefix, PROPERTY_ID)
            a, b, forward = nodes[i - 1], nodes[i], row.get(f"f{i}") == "true"
            if relation is None or a is None or b is None:
                return None
            steps.append((a, relation, b, True) if forward else (b, relation, a, False))
        return tuple(steps)

    # ---------------------------------------------------------------------------------- helpers

    def _iri(self, value: str, pattern: re.Pattern[str]) -> str:
        """``<prefix + id>`` for an id of the given shape; anything else is refused, never interpolated."""
        if not isinstance(value, str) or not pattern.fullmatch(value):
            raise BackendError(f"{value!r} is not a valid id for the SPARQL endpoint {self.endpoint} "
                               f"(expected an id like Q42 or P27); nothing was queried")
        return f"<{self.entity_prefix}{value}>"

    def _direct(self, relation_id: str) -> str:
        self._iri(relation_id, PROPERTY_ID)
        return f"<{self.property_prefix}{relation_id}>"

    def _short(self, iri: str, prefix: str, pattern: re.Pattern[str]) -> str | None:
        rest = iri[len(prefix):] if iri.startswith(prefix) else ""
        return rest if pattern.fullmatch(rest) else None

    def _lang(self, variable: str) -> str:
        return f"LANG({variable}) = {sparql_literal(self.language)}"

    def _terms(self, node: str) -> str:
        """UNION branches binding ?l (label), ?d (description) and ?a (aliases) of a node."""
        return (f"{{ {node} rdfs:label ?l . FILTER({self._lang('?l')}) }}\n"
                f"  UNION {{ {node} schema:description ?d . FILTER({self._lang('?d')}) }}\n"
                f"  UNION {{ {node} skos:altLabel ?a . FILTER({self._lang('?a')}) }}")

    def _refs(self, pairs: Iterable[tuple[str, str]], *, sort: bool = True) -> list[Ref]:
        refs: dict[str, str] = {}
        for iri, label in pairs:
            short = self._short(iri, self.entity_prefix, NODE_ID)
            if short and not refs.get(short):
                refs[short] = label
        items = sorted(refs.items(), key=lambda kv: (len(kv[0]), kv[0])) if sort else list(refs.items())
        return [Ref(key, label) for key, label in items]

    def _labels(self, ids: Iterable[str]) -> dict[str, str]:
        labels: dict[str, str] = {}
        unique = sorted(set(ids))
        for start in range(0, len(unique), _LABEL_BATCH):
            values = " ".join(self._iri(i, NODE_ID) for i in unique[start:start + _LABEL_BATCH])
            for row in self._select(f"{_PREFIXES}SELECT ?e ?l WHERE {{ VALUES ?e {{ {values} }} "
                                    f"?e rdfs:label ?l . FILTER({self._lang('?l')}) }}"):
                short = self._short(row.get("e", ""), self.entity_prefix, NODE_ID)
                if short and "l" in row:
                    labels.setdefault(short, row["l"])
        return labels

    # ------------------------------------------------------------------------------------- HTTP

    def _select(self, query: str) -> list[Row]:
        """Rows of a SELECT as {variable: value}, retrying what may be transient (verifier/retrying.py)."""
        attempts = 0

        def attempt() -> list[Row]:
            nonlocal attempts
            attempts += 1
            return self._select_once(query)

        try:
            return call_with_retries(attempt, retries=self.retries, backoff=self.backoff, cap=self.max_wait,
                                     what=f"SPARQL endpoint {self.endpoint}")
        except Transient as failure:
            retried = f"retried {self.retries} times, " if self.retries else ""
            raise BackendError(f"SPARQL endpoint {self.endpoint} {failure.reason}; {retried}retrying later may help") from None
        except _Refused as failure:
            after = f" (after {attempts - 1} retries)" if attempts > 1 else ""
            raise BackendError(f"SPARQL endpoint {self.endpoint} {failure.problem}{after}") from None

    def _select_once(self, query: str) -> list[Row]:
        wrapper = SPARQLWrapper(self.endpoint, agent=self.user_agent)
        wrapper.setReturnFormat(JSON)
        wrapper.setOnlyConneg(True)  # the Accept header only, no format=/output= parameters
        wrapper.setQuery(query)
        # SPARQLWrapper guesses the query form by regex and would send a guessed update form as update=;
        # we only ever send SELECT.
        wrapper.queryType = SELECT
        # setTimeout() truncates to int (0.5 s becomes 0 = no timeout at all); urlopen takes a float.
        wrapper.timeout = self.timeout  # type: ignore[assignment]
        wrapper.setMethod(GET if len(quote_plus(query)) <= _MAX_GET_QUERY else POST)
        try:
            response = wrapper.query().response
            with closing(response):
                body = response.read()
        except (SPARQLWrapperException, OSError, http.client.HTTPException, ValueError) as exc:
            raise self._failure(exc) from None
        return _bindings(body)

    def _failure(self, exc: Exception) -> Transient | _Refused:
        """What went wrong, for one line of a message, and whether another attempt may succeed."""
        if isinstance(exc, EndPointInternalError):  # SPARQLWrapper maps only 400/401/404/414/500
            if "TimeoutException" in str(exc):  # Blazegraph (Wikidata) names its query timeout at the end
                return Transient("stopped the query at its own time limit (HTTP 500)")
            return Transient(f"returned HTTP 500 ({_snippet(exc)})")
        if isinstance(exc, QueryBadFormed):
            return _Refused(f"rejected the query (HTTP 400: {_snippet(exc)}); retrying will not help")
        if isinstance(exc, SPARQLWrapperException):
            return _Refused(f"refused the request ({_snippet(exc)})")
        if isinstance(exc, urllib.error.HTTPError):
            wait = retry_after(exc.headers)
            exc.close()
            problem = f"returned HTTP {exc.code} {exc.reason}"
            return Transient(problem, retry_after=wait, status_code=exc.code) if exc.code in _RETRY_STATUS else _Refused(problem)
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        if isinstance(reason, TimeoutError):
            return Transient(f"did not answer within {self.timeout:g} s")
        if isinstance(reason, ConnectionRefusedError):
            return Transient("refused the connection (is it running?)")
        return Transient(f"could not be reached ({type(reason).__name__}: {reason})")


def _bindings(body: bytes) -> list[Row]:
    """The rows of a SPARQL JSON results document; anything else is a malformed answer."""
    try:
        data = json.loads(body.decode("utf-8"))
        rows = [{variable: term["value"] for variable, term in binding.items()} for binding in data["results"]["bindings"]]
        if not all(isinstance(value, str) for row in rows for value in row.values()):
            raise TypeError("a value is not a string")
        return rows
    except (ValueError, KeyError, TypeError, AttributeError):
        raise _Refused(f"returned a malformed response, not SPARQL JSON results ({_snippet(body)})") from None


def _snippet(value: object, size: int = 120) -> str:
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
    if isinstance(value, SPARQLWrapperException):  # its message is "Name: msg. \n\nResponse:\n<repr of body>"
        text = text.split("Response:\n", 1)[-1]
        with suppress(ValueError, SyntaxError, AttributeError):
            text = ast.literal_eval(text).decode("utf-8", "replace")
    text = " ".join(text.split())
    return repr(text[:size] + ("…" if len(text) > size else ""))


def _case_variants(text: str) -> list[str]:
    """Exact label lookups use the literal itself (indexed on Wikidata, unlike LCASE over all labels),
    so try the casings names are usually written in."""
    variants = [text, text.lower(), text[:1].upper() + text[1:], text.title(), text.upper()]
    return list(dict.fromkeys(variants))


def _terms_of(rows: list[Row]) -> tuple[str, str, list[str]]:
    label = next((row["l"] for row in rows if "l" in row), "")
    description = next((row["d"] for row in rows if "d" in row), "")
    aliases = sorted({row["a"] for row in rows if "a" in row})
    return label, description, aliases


def _edge(triple: tuple[str, str, str], labels: dict[str, str]) -> Edge:
    head, relation, tail = triple
    return Edge(Ref(head, labels.get(head, "")), Ref(relation, labels.get(relation, "")), Ref(tail, labels.get(tail, "")))
