"""The tools on the SPARQL backend (a Wikidata-shaped graph behind a real local SPARQL endpoint)."""

import pytest

from tests.sparql_endpoint import SparqlTestEndpoint
from verifier.agent.steps import Claim
from verifier.kg.sparql import SparqlBackend
from verifier.tools.base import ToolContext
from verifier.tools.registry import Toolbox


@pytest.fixture(scope="module")
def endpoint():
    with SparqlTestEndpoint() as running:
        yield running


@pytest.fixture
def toolbox(endpoint):
    endpoint.recover()
    backend = SparqlBackend(endpoint.url, timeout=2, retries=1, backoff=0.01, max_wait=0.1)
    query = Claim("Q42", "P27", "Q145", "Douglas Adams", "country of citizenship", "United Kingdom")
    return Toolbox(ToolContext(kg=backend, query=query))


def test_definitions_from_wikidata_with_declared_constraints(toolbox):
    entity = toolbox.call("KG_Definition", ["Douglas Adams"]).text
    assert entity.startswith("Entity Profile: Q42\nLabel: Douglas Adams")
    relation = toolbox.call("KG_Definition", ["country of citizenship"]).text
    assert "Subject Constraint (Domain): human (Q5)" in relation and "Object Constraint (Range): country (Q6256)" in relation
    assert "declares no schema" not in relation


def test_neighbours_and_paths_withhold_the_query_triple(toolbox):
    neighbours = toolbox.call("KG_Neighbor", ["Douglas Adams", "country of citizenship"]).text
    assert "(Douglas Adams) -> [place of birth] -> (Cambridge)" in neighbours
    assert "-> [country of citizenship] -> (United Kingdom)" not in neighbours
    assert "(Douglas Adams) <- [author] <- (The Hitchhiker's Guide to the Galaxy)" in neighbours
    paths = toolbox.call("KG_Path", ["Douglas Adams", "United Kingdom"]).text
    assert "(Douglas Adams) -[place of birth]-> (Cambridge) -[country]-> (United Kingdom)" in paths
    assert "(Douglas Adams) -[country of citizenship]->" not in paths


def test_ambiguous_names_on_the_endpoint(toolbox):
    result = toolbox.call("KG_Definition", ["Paris"])
    assert not result.ok and "Q90: Paris (capital and largest city of France)" in result.text
    assert "Q167646: Paris (son of Priam, king of Troy)" in result.text


def test_a_dead_endpoint_becomes_an_observation_not_an_exception(endpoint, toolbox):
    endpoint.stop()
    try:
        result = toolbox.call("KG_Neighbor", ["Q937"])
    finally:
        endpoint.start()
    assert not result.ok
    assert result.text.startswith("KG_Neighbor could not get an answer: SPARQL endpoint")
    assert "refused the connection" in result.text


@pytest.mark.slow
def test_a_slow_endpoint_times_out_into_an_observation(endpoint, toolbox):
    endpoint.fail("slow", delay=3.0)
    result = toolbox.call("KG_Path", ["Q937", "Q183"])
    assert not result.ok and "could not get an answer" in result.text


def test_a_malformed_answer_becomes_an_observation(endpoint, toolbox):
    endpoint.fail("malformed")
    result = toolbox.call("KG_Definition", ["Q937"])
    assert not result.ok and "could not get an answer" in result.text
