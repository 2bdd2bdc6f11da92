"""SparqlBackend against a real local SPARQL endpoint (pyoxigraph over HTTP), failures included."""

from __future__ import annotations

import time
import urllib.parse
import urllib.request

import pyoxigraph
import pytest

from tests.sparql_endpoint import HOSTILE_ID, HOSTILE_LABEL, SparqlTestEndpoint
from verifier.kg.base import BackendError, KGBackend
from verifier.kg.sparql import SparqlBackend, sparql_literal


@pytest.fixture(scope="module")
def endpoint():
    with SparqlTestEndpoint() as running:
        yield running


@pytest.fixture(autouse=True)
def healthy(endpoint):
    endpoint.recover()
    endpoint.requests.clear()
    yield endpoint
    endpoint.recover()


@pytest.fixture
def backend(endpoint):
    return SparqlBackend(endpoint.url, timeout=2, retries=2, backoff=0.01, max_wait=0.2)


def _walks(paths):
    return [[(step.edge.ids, step.forward) for step in path.steps] for path in paths]


# ------------------------------------------------------------------------------ query building

HOSTILE_TEXTS = [
    HOSTILE_LABEL, 'a"b', "a\\", '"""', "'''", "} } DROP ALL ; INSERT DATA { <a> <b> <c> } #", "line\nbreak\r\n\ttab",
    "\\u0022 } #", "\\\\u0022", "\\U0001F600", "nul\x00bell\x07del\x7f", "é 日本 🙂", "\\", "a\\\"b", "#", "?x $y <z>",
]


@pytest.mark.parametrize("text", HOSTILE_TEXTS)
def test_sparql_literal_round_trips_any_text_unchanged(text):
    store = pyoxigraph.Store()
    [solution] = list(store.query(f"SELECT ?x WHERE {{ BIND({sparql_literal(text)} AS ?x) }}"))
    assert solution["x"].value == text
    [solution] = list(store.query(f"SELECT ?x WHERE {{ BIND({sparql_literal(text, 'en')} AS ?x) }}"))
    assert solution["x"].value == text and solution["x"].language == "en"


def test_sparql_literal_leaves_no_live_escape_or_line_break():
    literal = sparql_literal('\\u0022"\n\r')
    assert "\n" not in literal and "\r" not in literal
    # A parser that expands \uXXXX before tokenizing must not see one either: \\ then \u0075 ("u").
    assert literal == '"\\\\\\u00750022\\"\\n\\r"'


def test_sparql_literal_refuses_a_bad_language_tag():
    with pytest.raises(ValueError):
        sparql_literal("x", 'en" } DROP')


def test_backend_implements_the_protocol_and_has_a_version(endpoint):
    backend = SparqlBackend(endpoint.url, data_version="2024-05-01")
    assert isinstance(backend, KGBackend)
    assert backend.version == f"sparql:{endpoint.url}@2024-05-01"
    assert SparqlBackend(endpoint.url).version == f"sparql:{endpoint.url}"
    assert SparqlBackend().endpoint == "https://query.wikidata.org/sparql"


def test_bad_configuration_is_refused_at_construction():
    with pytest.raises(ValueError):
        SparqlBackend("file:///etc/passwd")
    with pytest.raises(ValueError):
        SparqlBackend(entity_prefix="http://example.org/> } #")
    with pytest.raises(ValueError):
        SparqlBackend(language='en") } #')


# ------------------------------------------------------------------------------------- names

def test_find_entity_by_id(backend):
    for text in ("Q42", "q42", " Q42 "):
        [found] = backend.find_entities(text)
        assert (found.id, found.label, found.match, found.score) == ("Q42", "Douglas Adams", "id", 1.0)
        assert found.description == "English writer and humorist"


def test_find_entity_by_exact_label_ignores_case(backend):
    for text in ("Douglas Adams", "douglas adams", "DOUGLAS ADAMS", "dOuGlAs aDaMs", "st john's college"):
        found = backend.find_entities(text)
        assert [(c.match, c.score) for c in found] == [("exact", 1.0)], text
    assert backend.find_entities("st john's college")[0].id == "Q691283"


def test_find_entity_by_alias(backend):
    [found] = backend.find_entities("Britain")
    assert (found.id, found.label, found.match) == ("Q145", "United Kingdom", "alias")
    assert 0 < found.score < 1


def test_find_entity_fuzzy_scores_below_exact(backend):
    [found] = backend.find_entities("douglas")
    assert (found.id, found.match) == ("Q42", "fuzzy")
    assert 0 < found.score < 0.95


def test_ambiguous_label_returns_every_entity_with_its_description(backend):
    found = backend.find_entities("Paris")
    assert {(c.id, c.description) for c in found} == {
        ("Q90", "capital and largest city of France"), ("Q167646", "son of Priam, king of Troy")}
    assert all(c.match == "exact" and c.label == "Paris" for c in found)
    assert len(backend.find_entities("Paris", limit=1)) == 1


def test_unknown_names_find_nothing(backend):
    assert backend.find_entities("Zaphod Beeblebrox") == []
    assert backend.find_entities("Q123456789") == []
    assert backend.find_entities("   ") == []
    assert backend.find_relations("teleported to") == []


def test_entities_and_relations_are_kept_apart(backend):
    assert [c.id for c in backend.find_entities("country")] == ["Q6256"]
    assert [c.id for c in backend.find_relations("country")] == ["P17"]
    assert backend.find_entities("P27") == [] and backend.find_relations("Q42") == []


def test_find_relations_by_id_label_and_alias(backend):
    assert [(c.id, c.match) for c in backend.find_relations("P27")] == [("P27", "id")]
    assert [(c.id, c.match) for c in backend.find_relations("Place of Birth")] == [("P19", "exact")]
    assert [(c.id, c.match) for c in backend.find_relations("nationality")] == [("P27", "alias")]
    assert [(c.id, c.match) for c in backend.find_relations("citizen")][0] == ("P27", "fuzzy")


def test_labels_are_filtered_by_language(endpoint, backend):
    assert backend.find_entities("Vereinigtes Königreich") == []
    german = SparqlBackend(endpoint.url, language="de", timeout=2)
    [found] = german.find_entities("vereinigtes königreich")
    assert (found.id, found.label, found.match) == ("Q145", "Vereinigtes Königreich", "exact")
    assert german.entity("Q145").label == "Vereinigtes Königreich"
    assert german.entity("Q350").label == ""  # no German label: no English one either
    assert backend.entity("Q145").label == "United Kingdom"


# ---------------------------------------------------------------------------------- profiles

def test_entity_profile_has_terms_and_types(backend):
    profile = backend.entity("Q42")
    assert (profile.id, profile.label, profile.description) == ("Q42", "Douglas Adams", "English writer and humorist")
    assert profile.aliases == ["DNA", "Douglas Noel Adams"]
    assert [(t.id, t.label) for t in profile.types] == [("Q5", "human")]


def test_unknown_entity_has_no_profile(backend):
    assert backend.entity("Q123456") is None
    assert backend.relation("P9999") is None


def test_relation_profile_with_declared_domain_and_range(backend):
    profile = backend.relation("P27")
    assert (profile.label, profile.aliases) == ("country of citizenship", ["citizenship", "nationality"])
    assert profile.description.startswith("the object is a country")
    assert [(r.id, r.label) for r in profile.domain] == [("Q5", "human")]
    assert [(r.id, r.label) for r in profile.range] == [("Q6256", "country")]
    assert profile.schema_source == "declared"


def test_relation_without_constraints_gets_a_schema_derived_from_observed_types(backend):
    profile = backend.relation("P19")
    assert profile.label == "place of birth"
    assert [(r.id, r.label) for r in profile.domain] == [("Q5", "human")]
    assert [(r.id, r.label) for r in profile.range] == [("Q515", "city")]
    assert profile.schema_source == "derived"


# ------------------------------------------------------------------------------ edges and paths

def test_edges_go_both_ways_with_labels_and_skip_literals(backend):
    edges = backend.edges("Q42")
    assert [e.ids for e in edges] == [
        ("Q42", "P19", "Q350"), ("Q42", "P27", "Q145"), ("Q42", "P31", "Q5"), ("Q42", "P69", "Q691283"),
        ("Q25169", "P50", "Q42"),
    ]
    incoming = edges[-1]
    assert (incoming.head.label, incoming.relation.label, incoming.tail.label) == (
        "The Hitchhiker's Guide to the Galaxy", "author", "Douglas Adams")
    assert edges[1].relation.label == "country of citizenship" and edges[1].tail.label == "United Kingdom"
    assert len(backend.edges("Q42", limit=2)) == 2
    assert backend.edges("Q123456") == []


def test_paths_of_one_two_and_three_hops_come_shortest_first(backend):
    paths = backend.paths("Q42", "Q145")
    assert [p.hops for p in paths] == [1, 2, 3, 3]
    assert _walks(paths) == [
        [(("Q42", "P27", "Q145"), True)],
        [(("Q42", "P19", "Q350"), True), (("Q350", "P17", "Q145"), True)],
        [(("Q42", "P31", "Q5"), True), ((HOSTILE_ID, "P31", "Q5"), False), ((HOSTILE_ID, "P27", "Q145"), True)],
        [(("Q42", "P69", "Q691283"), True), (("Q691283", "P131", "Q350"), True), (("Q350", "P17", "Q145"), True)],
    ]
    assert paths[0].steps[0].edge.relation.label == "country of citizenship"
    assert paths[2].steps[1].edge.head.label == HOSTILE_LABEL


def test_entities_sharing_a_label_in_one_answer_are_written_with_their_ids(backend):
    city = {e.relation.id: (e.head.distinct_name, e.tail.distinct_name) for e in backend.edges("Q90")}
    assert city == {"P17": ("Paris [Q90]", "France"), "P1889": ("Paris [Q90]", "Paris [Q167646]"),
                    "P31": ("Paris [Q90]", "city")}
    # the only Paris of an answer is written by its label: on Wikidata nearly every label has a namesake
    assert {e.head.distinct_name for e in backend.edges("Q142")} == {"Paris", "France"}
    path = backend.paths("Q142", "Q167646", max_hops=2)[0]
    assert [(s.edge.head.distinct_name, s.edge.tail.distinct_name) for s in path.steps] == [
        ("Paris [Q90]", "France"), ("Paris [Q90]", "Paris [Q167646]")]


def test_paths_walk_edges_backwards(backend):
    paths = backend.paths("Q145", "Q42", max_hops=2)
    assert _walks(paths) == [
        [(("Q42", "P27", "Q145"), False)],
        [(("Q350", "P17", "Q145"), False), (("Q42", "P19", "Q350"), False)],
    ]


def test_paths_never_use_an_excluded_edge(backend):
    excluded = ("Q42", "P27", "Q145")
    paths = backend.paths("Q42", "Q145", exclude=frozenset({excluded}))
    assert [p.hops for p in paths] == [2, 3, 3]
    assert all(excluded not in (e.ids for e in p.edges) for p in paths)
    both = frozenset({excluded, ("Q350", "P17", "Q145")})
    assert _walks(backend.paths("Q42", "Q145", exclude=both)) == [
        [(("Q42", "P31", "Q5"), True), ((HOSTILE_ID, "P31", "Q5"), False), ((HOSTILE_ID, "P27", "Q145"), True)]]


def test_paths_never_pass_through_their_ends_and_respect_limits(backend):
    for path in backend.paths("Q42", "Q145"):
        walked = [path.steps[0].edge.head.id if path.steps[0].forward else path.steps[0].edge.tail.id]
        for step in path.steps:
            walked.append(step.edge.tail.id if step.forward else step.edge.head.id)
        assert walked[0] == "Q42" and walked[-1] == "Q145"
        assert not {"Q42", "Q145"} & set(walked[1:-1]) and len(set(walked)) == len(walked)
    assert [p.hops for p in backend.paths("Q42", "Q145", limit=2)] == [1, 2]
    assert [p.hops for p in backend.paths("Q42", "Q145", max_hops=1)] == [1]
    assert backend.paths("Q42", "Q42") == [] and backend.paths("Q42", "Q123456") == []


# ---------------------------------------------------------------------------- hostile input

def test_a_hostile_label_round_trips_without_changing_the_query(backend, endpoint):
    [found] = backend.find_entities(HOSTILE_LABEL)
    assert (found.id, found.label, found.match) == (HOSTILE_ID, HOSTILE_LABEL, "exact")
    assert backend.entity(HOSTILE_ID).label == HOSTILE_LABEL
    assert [c.id for c in backend.find_entities('"}" label\n{ DROP }')] == [HOSTILE_ID]
    for text in HOSTILE_TEXTS[1:]:  # found only where they really are part of a label
        found = backend.find_entities(text)
        assert all(c.match == "fuzzy" and text.strip().lower() in c.label.lower() for c in found), text
    assert [c.id for c in backend.find_entities('"""')] == [HOSTILE_ID]
    assert backend.find_entities("} } DROP ALL ; INSERT DATA { <a> <b> <c> } #") == []
    assert endpoint.requests and all(r.query.lstrip().startswith(("PREFIX", "SELECT")) for r in endpoint.requests)


@pytest.mark.parametrize("bad_id", ["Q1> } DROP", "Q42\n", "Q42 ", "wd:Q42", "<Q42>", "", "Q0", "Q42#", "Q４２"])
def test_malformed_ids_are_refused_before_any_query(backend, endpoint, bad_id):
    for call in (lambda: backend.entity(bad_id), lambda: backend.relation(bad_id.replace("Q", "P")),
                 lambda: backend.edges(bad_id), lambda: backend.paths(bad_id, "Q145"), lambda: backend.paths("Q42", bad_id)):
        with pytest.raises(BackendError, match="not a valid id"):
            call()
    assert endpoint.requests == []


def test_an_excluded_edge_with_a_malformed_id_cannot_reach_the_query(backend):
    paths = backend.paths("Q42", "Q145", max_hops=1, exclude=frozenset({("Q42> } #", "P27", "Q145")}))
    assert _walks(paths) == [[(("Q42", "P27", "Q145"), True)]]


def test_long_queries_are_posted(backend, endpoint):
    assert backend.find_entities("x" * 3000) == []
    assert "POST" in {r.method for r in endpoint.requests}


def test_the_endpoint_helper_serves_post_with_a_sparql_query_body(endpoint):
    request = urllib.request.Request(endpoint.url, data=b"ASK { ?s ?p ?o }", method="POST",
                                     headers={"Content-Type": "application/sparql-query"})
    with urllib.request.urlopen(request, timeout=2) as response:
        assert response.headers["Content-Type"] == "application/sparql-results+json"
        assert b'"boolean":true' in response.read()
    with urllib.request.urlopen(endpoint.url + "?" + urllib.parse.urlencode({"query": "SELECT * {}"}), timeout=2) as response:
        assert response.status == 200


# ---------------------------------------------------------------------------------- failures

def _fails_fast(call, *fragments):
    started = time.monotonic()
    with pytest.raises(BackendError) as failure:
        call()
    assert time.monotonic() - started < 5
    message = str(failure.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, message
    return message


def test_endpoint_down_is_a_clear_error_after_retries():
    with SparqlTestEndpoint() as endpoint:
        backend = SparqlBackend(endpoint.url, retries=2, backoff=0.01, timeout=1)
        assert backend.entity("Q42").label == "Douglas Adams"
        endpoint.stop()
        _fails_fast(lambda: backend.entity("Q42"), endpoint.url, "refused the connection", "retried 2 times")
        endpoint.start()
        assert backend.entity("Q42").label == "Douglas Adams"


def test_slow_endpoint_times_out(endpoint):
    backend = SparqlBackend(endpoint.url, timeout=0.3, retries=1, backoff=0.01)
    endpoint.fail("slow", delay=3)
    _fails_fast(lambda: backend.find_entities("Paris"), endpoint.url, "did not answer within 0.3 s", "retried 1 times")
    assert len(endpoint.requests) == 2


def test_server_errors_are_retried_until_the_endpoint_recovers(endpoint, backend):
    endpoint.fail("error", times=2)
    assert backend.entity("Q42").label == "Douglas Adams"
    assert len(endpoint.requests) == 3


def test_persistent_server_errors_name_the_endpoint_and_the_retries(endpoint, backend):
    endpoint.fail("error")
    _fails_fast(lambda: backend.edges("Q42"), endpoint.url, "HTTP 500 ('simulated failure')", "retried 2 times")
    assert len(endpoint.requests) == 3
    endpoint.fail("error", status=503, retry_after="1")
    _fails_fast(lambda: backend.edges("Q42"), "HTTP 503", "retried 2 times")


def test_a_query_stopped_by_the_server_time_limit_says_so(endpoint, backend):
    endpoint.fail("error", body=b"SPARQL-QUERY: queryStr=SELECT ...\njava.util.concurrent.TimeoutException")
    _fails_fast(lambda: backend.paths("Q42", "Q145"), "stopped the query at its own time limit", "retried 2 times")


def test_retry_after_is_honoured_but_capped(endpoint, backend):
    endpoint.fail("error", times=1, status=429, retry_after="3600")
    started = time.monotonic()
    assert backend.find_entities("Q42")[0].id == "Q42"
    assert time.monotonic() - started < 2  # max_wait=0.2 caps the hour the server asked for


def test_client_errors_are_not_retried(endpoint, backend):
    endpoint.fail("error", status=400)
    _fails_fast(lambda: backend.entity("Q42"), "HTTP 400", "retrying will not help")
    endpoint.fail("error", status=403)
    _fails_fast(lambda: backend.entity("Q42"), "HTTP 403")
    assert len(endpoint.requests) == 2


@pytest.mark.parametrize("body", [b"<html><body>502 Bad Gateway</body></html>", b'{"head": {}, "results": 42}',
                                  b'{"results": {"bindings": [{"e": {"value": 7}}]}}', b"\xff\xfe garbage", b"[]"])
def test_malformed_responses_are_a_clear_error(endpoint, backend, body):
    endpoint.fail("malformed", body=body)
    _fails_fast(lambda: backend.find_entities("Paris"), endpoint.url, "malformed response")
    assert len(endpoint.requests) == 1
