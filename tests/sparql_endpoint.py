"""A real SPARQL 1.1 HTTP endpoint for tests: a pyoxigraph store served on 127.0.0.1 from a thread.

    with SparqlTestEndpoint() as endpoint:            # loaded with wikidata_sample_ntriples()
        backend = SparqlBackend(endpoint.url, ...)
        endpoint.fail("error", times=2)               # HTTP 500 for the next 2 requests, then answers
        endpoint.stop()                               # down: connection refused on the same port

Failure modes: "slow" (sleeps ``delay`` seconds before answering), "error" (HTTP ``status``, 500 by
default, with an optional Retry-After and ``body``), "malformed" (HTTP 200 with ``body``, not SPARQL JSON).
``times`` limits a mode to the next N requests; ``recover()`` ends it. ``requests`` records every
(method, query) received. Queries run read-only (``Store.query`` executes no updates).
"""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pyoxigraph

WD = "http://www.wikidata.org/entity/"
WDT = "http://www.wikidata.org/prop/direct/"
P = "http://www.wikidata.org/prop/"
PS = "http://www.wikidata.org/prop/statement/"
PQ = "http://www.wikidata.org/prop/qualifier/"
RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
DESCRIPTION = "http://schema.org/description"
ALT_LABEL = "http://www.w3.org/2004/02/skos/core#altLabel"

HOSTILE_ID = "Q999999"
HOSTILE_LABEL = 'Evil "}" label\n{ DROP } # \\"""'

# id: (English label, English description, English aliases)
ENTITIES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "Q42": ("Douglas Adams", "English writer and humorist", ("Douglas Noel Adams", "DNA")),
    "Q5": ("human", "common name of Homo sapiens", ("person",)),
    "Q145": ("United Kingdom", "country in north-west Europe", ("UK", "Britain")),
    "Q6256": ("country", "distinct territorial body or political entity", ()),
    "Q350": ("Cambridge", "city in Cambridgeshire, England", ()),
    "Q515": ("city", "large human settlement", ()),
    "Q691283": ("St John's College", "constituent college of the University of Cambridge", ()),
    "Q2385804": ("educational institution", "institution that provides education", ()),
    "Q90": ("Paris", "capital and largest city of France", ("City of Light",)),
    "Q142": ("France", "country in Western Europe", ()),
    "Q167646": ("Paris", "son of Priam, king of Troy", ("Alexander",)),
    "Q937": ("Albert Einstein", "German-born theoretical physicist", ()),
    "Q3012": ("Ulm", "city in Baden-Württemberg, Germany", ()),
    "Q183": ("Germany", "country in Central Europe", ()),
    "Q25169": ("The Hitchhiker's Guide to the Galaxy", "comedy science fiction franchise", ()),
    "Q7725634": ("literary work", "creation of literature", ()),
    HOSTILE_ID: (HOSTILE_LABEL, 'a label with "quotes", braces and a backslash \\', ()),
    "Q21503250": ("subject type constraint", "type of constraint for Wikidata properties", ()),
    "Q21510865": ("value-type constraint", "type of constraint for Wikidata properties", ()),
    "Q19474404": ("single-value constraint", "type of constraint for Wikidata properties", ()),
    "P31": ("instance of", "that class of which this subject is a particular example", ("is a",)),
    "P27": ("country of citizenship", "the object is a country that recognizes the subject as its citizen",
            ("citizenship", "nationality")),
    "P19": ("place of birth", "most specific known birth location of a person", ("birthplace", "born in")),
    "P17": ("country", "sovereign state that this item is in", ()),
    "P131": ("located in the administrative territorial entity", "the item is located on the territory of", ()),
    "P69": ("educated at", "educational institution attended by subject", ("alma mater",)),
    "P50": ("author", "main creator of a written work", ("writer",)),
    "P1889": ("different from", "item that is different from another item, with which it may be confused", ()),
}
GERMAN_LABELS = {"Q145": "Vereinigtes Königreich", "Q42": "Douglas Adams"}

EDGES = [
    ("Q42", "P31", "Q5"), ("Q42", "P27", "Q145"), ("Q42", "P19", "Q350"), ("Q42", "P69", "Q691283"),
    ("Q25169", "P50", "Q42"), ("Q25169", "P31", "Q7725634"),
    ("Q145", "P31", "Q6256"), ("Q350", "P31", "Q515"), ("Q350", "P17", "Q145"),
    ("Q691283", "P31", "Q2385804"), ("Q691283", "P131", "Q350"),
    ("Q90", "P31", "Q515"), ("Q90", "P17", "Q142"), ("Q142", "P31", "Q6256"),
    ("Q167646", "P31", "Q5"), ("Q90", "P1889", "Q167646"),
    ("Q937", "P31", "Q5"), ("Q937", "P19", "Q3012"), ("Q937", "P27", "Q183"),
    ("Q3012", "P31", "Q515"), ("Q3012", "P17", "Q183"), ("Q183", "P31", "Q6256"),
    (HOSTILE_ID, "P31", "Q5"), (HOSTILE_ID, "P27", "Q145"),
]
# (property, statement id, constraint kind, class): Wikidata's p:P2302 / ps:P2302 / pq:P2308 shape.
CONSTRAINTS = [
    ("P27", "c1", "Q21503250", "Q5"),
    ("P27", "c2", "Q21510865", "Q6256"),
    ("P17", "c3", "Q21510865", "Q6256"),
]


def wikidata_sample_ntriples() -> str:
    """A small Wikidata-shaped graph (truthy wdt: edges, labels, constraints) as N-Triples text."""

    def iri(value: str) -> str:
        return str(pyoxigraph.NamedNode(value))

    def text(value: str, language: str = "en") -> str:
        return str(pyoxigraph.Literal(value, language=language))

    lines = []
    for entity, (label, description, aliases) in ENTITIES.items():
        lines.append(f"{iri(WD + entity)} {iri(RDFS_LABEL)} {text(label)} .")
        lines.append(f"{iri(WD + entity)} {iri(DESCRIPTION)} {text(description)} .")
        lines += [f"{iri(WD + entity)} {iri(ALT_LABEL)} {text(alias)} ." for alias in aliases]
    lines += [f"{iri(WD + e)} {iri(RDFS_LABEL)} {text(label, 'de')} ." for e, label in GERMAN_LABELS.items()]
    lines += [f"{iri(WD + h)} {iri(WDT + r)} {iri(WD + t)} ." for h, r, t in EDGES]
    for prop, statement, kind, cls in CONSTRAINTS:
        node = iri(f"{WD}statement/{prop}-{statement}")
        lines += [f"{iri(WD + prop)} {iri(P + 'P2302')} {node} .", f"{node} {iri(PS + 'P2302')} {iri(WD + kind)} .",
                  f"{node} {iri(PQ + 'P2308')} {iri(WD + cls)} ."]
    # A constraint kind the backend must ignore, and edges that are not entity-to-entity.
    other = iri(f"{WD}statement/P27-c4")
    lines += [f"{iri(WD + 'P27')} {iri(P + 'P2302')} {other} .", f"{other} {iri(PS + 'P2302')} {iri(WD + 'Q19474404')} ."]
    lines.append(f"{iri(WD + 'Q42')} {iri(WDT + 'P1477')} {text('Douglas Noël Adams')} .")
    lines.append(f"{iri(WD + 'Q42')} {iri(WDT + 'P18')} {iri('http://commons.wikimedia.org/wiki/Special:FilePath/Douglas_adams.jpg')} .")
    return "\n".join(lines) + "\n"


def wikidata_sample_store() -> pyoxigraph.Store:
    store = pyoxigraph.Store()
    store.load(wikidata_sample_ntriples(), format=pyoxigraph.RdfFormat.N_TRIPLES)
    return store


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    query: str


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        self._answer(parse_qs(urlsplit(self.path).query).get("query", [""])[0])

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode("utf-8")
        kind = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        if kind == "application/sparql-query":
            self._answer(body)
        else:
            self._answer(parse_qs(body).get("query", [""])[0])

    def _answer(self, query: str) -> None:
        endpoint = self.server.endpoint
        mode = endpoint._take_failure(RecordedRequest(self.command, query))
        try:
            if mode == "slow":
                endpoint._wake.wait(endpoint.delay)
            if mode == "error":
                headers = {"Retry-After": endpoint.retry_after} if endpoint.retry_after is not None else {}
                return self._send(endpoint.status, endpoint.body or b"simulated failure", "text/plain", headers)
            if mode == "malformed":
                return self._send(200, endpoint.body or b"<html><body>502 Bad Gateway</body></html>", "application/sparql-results+json")
            if not query:
                return self._send(400, b"missing query", "text/plain")
            try:
                results = endpoint.store.query(query)
            except SyntaxError as exc:
                return self._send(400, f"parse error: {exc}".encode(), "text/plain")
            if not isinstance(results, pyoxigraph.QuerySolutions | pyoxigraph.QueryBoolean):
                return self._send(400, b"only SELECT and ASK are served", "text/plain")
            payload = results.serialize(format=pyoxigraph.QueryResultsFormat.JSON)
            self._send(200, payload, "application/sparql-results+json")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout test); nothing to tell it

    def _send(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    endpoint: SparqlTestEndpoint


class SparqlTestEndpoint:
    """See the module docstring. ``url`` stays the same across ``stop()``/``start()``."""

    def __init__(self, store: pyoxigraph.Store | None = None) -> None:
        self.store = store if store is not None else wikidata_sample_store()
        self.requests: list[RecordedRequest] = []
        self.port = 0
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._placeholder: socket.socket | None = None
        self.recover()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/sparql"

    def start(self) -> SparqlTestEndpoint:
        if self._server is not None:
            return self
        if self._placeholder is not None:
            self._placeholder.close()
            self._placeholder = None
        self._wake.clear()
        self._server = _Server(("127.0.0.1", self.port), _Handler)
        self._server.endpoint = self
        self.port = self._server.server_address[1]
        server = self._server  # a short poll interval makes stop() quick
        self._thread = threading.Thread(target=lambda: server.serve_forever(poll_interval=0.05), name=f"sparql-endpoint-{self.port}",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; the port stays bound but not listening, so connections are refused."""
        if self._server is None:
            return
        self._wake.set()  # slow handlers wake up now
        self._server.shutdown()
        self._server.server_close()
        assert self._thread is not None
        self._thread.join(timeout=5)
        self._server = self._thread = None
        placeholder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        placeholder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        placeholder.bind(("127.0.0.1", self.port))  # bound, never listen(): the kernel refuses connections
        self._placeholder = placeholder

    def close(self) -> None:
        self.stop()
        if self._placeholder is not None:
            self._placeholder.close()
            self._placeholder = None

    def fail(self, mode: str, *, times: int | None = None, delay: float = 2.0, status: int = 500,
             retry_after: str | None = None, body: bytes = b"") -> None:
        if mode not in ("slow", "error", "malformed"):
            raise ValueError(f"unknown failure mode {mode!r} (use stop() for an endpoint that is down)")
        with self._lock:
            self.mode, self.times, self.delay, self.status, self.retry_after, self.body = mode, times, delay, status, retry_after, body

    def recover(self) -> None:
        with self._lock:
            self.mode: str | None = None
            self.times: int | None = None
            self.delay, self.status, self.retry_after, self.body = 0.0, 500, None, b""

    def _take_failure(self, request: RecordedRequest) -> str | None:
        with self._lock:
            self.requests.append(request)
            if self.mode is None or self.times is None:
                return self.mode
            if self.times <= 0:
                self.mode = None
                return None
            self.times -= 1
            return self.mode

    def __enter__(self) -> SparqlTestEndpoint:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()
