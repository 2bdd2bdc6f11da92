"""The five tools on the local Postgres store, as the model sees them."""

from dataclasses import replace

import pytest

from verifier.kg.store import PostgresKG, shared_labels
from verifier.models import Entity
from verifier.tools.base import ToolContext
from verifier.tools.registry import Toolbox
from verifier.tools.wiki_evidence import OPENING_CHARS, opening_of

pytestmark = pytest.mark.django_db


def call(ctx, name, *args, **kwargs):
    return Toolbox(ctx).call(name, kwargs or list(args))


# ------------------------------------------------------------------ name resolution


def test_names_resolve_by_id_label_alias_and_fuzzily(world):
    kg = world.kg
    assert [c.id for c in kg.find_entities("Q42")] == ["Q42"]
    assert kg.find_entities("douglas adams")[0].match == "exact"
    alias = kg.find_entities("Douglas Noel Adams")
    assert (alias[0].id, alias[0].match) == ("Q42", "alias")
    fuzzy = kg.find_entities("Duglas Adams")
    assert fuzzy and (fuzzy[0].id, fuzzy[0].match) == ("Q42", "fuzzy")
    assert kg.find_entities("Zzyzx Qwerty") == [] or kg.find_entities("Zzyzx Qwerty")[0].match == "embedding"


def test_a_name_matching_nothing_lexically_falls_back_to_passage_meaning(world):
    candidates = world.kg.find_entities("English humourist and screenwriter")
    assert candidates and candidates[0].id == "Q42" and candidates[0].match == "embedding"


def test_ambiguous_names_list_candidates_with_descriptions(world):
    result = call(world, "KG_Definition", "Paris")
    assert not result.ok
    assert "'Paris' is ambiguous" in result.text
    assert "Q90: Paris (capital of France)" in result.text and "Q830149: Paris (city in Texas, United States)" in result.text
    assert call(world, "KG_Definition", "Q830149").text.startswith("Entity Profile: Q830149")


def test_unknown_names_say_so(world):
    result = call(world, "KG_Neighbor", "Xq Vbnm Zzkw")
    assert not result.ok and "No entity named 'Xq Vbnm Zzkw' was found in world" in result.text


# ------------------------------------------------------------------ KG_Definition


def test_entity_profile(world):
    result = call(world, "KG_Definition", "Douglas Adams")
    assert result.text.splitlines() == [
        "Entity Profile: Q42",
        "Label: Douglas Adams",
        "Description: English writer and humorist",
        "Type: human (Q5)",
        "Aliases: Douglas Noel Adams",
    ]
    assert result.items[0].kind == "definition" and result.items[0].payload["entity"] == "Q42"


def test_relation_profile_says_when_domain_and_range_are_derived(world):
    text = call(world, "KG_Definition", "country of citizenship").text
    assert text.startswith("Relation Profile: P27\nLabel: country of citizenship")
    assert "Subject Constraint (Domain): human (Q5)" in text
    assert "Object Constraint (Range): country (Q6256)" in text
    assert "declares no schema" in text


# ------------------------------------------------------------------ KG_Neighbor and anti-leakage


def test_neighbours_are_ranked_by_relation_similarity_and_never_show_the_query_triple(world):
    result = call(world, "KG_Neighbor", "Douglas Adams", "country of citizenship")
    assert result.ok
    lines = result.text.splitlines()[1:]
    assert "(Douglas Adams) -> [country of citizenship] -> (United Kingdom)" not in lines
    assert set(lines) == {
        "(Douglas Adams) -> [place of birth] -> (Cambridge)",
        "(Douglas Adams) -> [educated at] -> (St John's College)",
        "(Douglas Adams) -> [notable work] -> (The Hitchhiker's Guide to the Galaxy)",
    }
    assert lines[0] == "(Douglas Adams) -> [place of birth] -> (Cambridge)"  # closest to citizenship
    assert all((i.payload["head"], i.payload["relation"], i.payload["tail"]) != ("Q42", "P27", "Q145") for i in result.items)


def test_neighbours_of_the_tail_hide_the_query_triple_read_backwards(world):
    text = call(world, "KG_Neighbor", "United Kingdom").text
    assert "(United Kingdom) <- [country of citizenship] <- (Douglas Adams)" not in text
    assert "(United Kingdom) <- [country] <- (Cambridge)" in text
    assert "(United Kingdom) -> [shares border with] -> (France)" in text


def test_without_a_query_triple_the_fact_is_visible(world):
    ctx = replace(world, query=None)
    assert "(Douglas Adams) -> [country of citizenship] -> (United Kingdom)" in call(ctx, "KG_Neighbor", "Q42").text


def test_the_reverse_reading_of_the_query_triple_is_withheld(world_kg):
    from verifier.agent.steps import Claim

    # Verifying (United Kingdom, P27, Douglas Adams) must not reveal (Douglas Adams, P27, United Kingdom).
    query = Claim("Q145", "P27", "Q42", "United Kingdom", "country of citizenship", "Douglas Adams")
    ctx = ToolContext(kg=PostgresKG(world_kg), query=query)
    assert "-> [country of citizenship] ->" not in call(ctx, "KG_Neighbor", "Q42").text
    assert "-[country of citizenship]-" not in call(ctx, "KG_Path", "Q145", "Q42").text


def test_a_label_another_entity_carries_is_written_with_its_id(world):
    # Two entities are labelled Paris: the France of a KG fact is the capital's, and the line says which Paris.
    text = call(world, "KG_Neighbor", "France").text
    assert "(France) <- [country] <- (Paris [Q90])" in text
    assert "(Paris)" not in text and "[Q142]" not in text  # France is the KG's only France
    assert "(Paris [Q90]) -[country]-> (France)" in call(world, "KG_Path", "Q90", "France").text
    assert shared_labels(world.kg.kg.pk, ["Paris", "paris", "France", ""]) == {"Paris", "paris"}
    # copied back into a tool call, the name with its id means that entity; an unknown id leaves the name
    assert call(world, "KG_Definition", "Paris [Q830149]").text.startswith("Entity Profile: Q830149")
    assert "'Paris' is ambiguous" in call(world, "KG_Definition", "Paris [Q1]").text
    assert call(world, "KG_Definition", "Cambridge [Q1]").text.startswith("Entity Profile: Q350")


def test_a_label_that_ends_in_brackets_is_not_read_as_a_label_and_id(world):
    Entity.objects.create(kg=world.kg.kg, external_id="Q777", label="Nocturnes [live]")
    assert call(world, "KG_Definition", "Nocturnes [live]").text.startswith("Entity Profile: Q777")


# ------------------------------------------------------------------ KG_Path


def test_paths_of_two_and_three_hops_in_either_direction(world):
    result = call(world, "KG_Path", "Douglas Adams", "United Kingdom")
    lines = result.text.splitlines()
    assert lines[0] == "Paths between Douglas Adams (Q42) and United Kingdom (Q145), shortest first:"
    assert "(Douglas Adams) -[place of birth]-> (Cambridge) -[country]-> (United Kingdom)" in lines
    assert ("(Douglas Adams) -[educated at]-> (St John's College) -[located in the administrative territorial entity]-> "
            "(Cambridge) -[country]-> (United Kingdom)") in lines
    assert not any("country of citizenship" in line for line in lines), "the query triple is not a path"
    assert [len(i.payload["edges"]) for i in result.items] == sorted(len(i.payload["edges"]) for i in result.items)


def test_paths_walk_edges_backwards(world):
    text = call(world, "KG_Path", "Cambridge", "Wales").text
    assert "(Cambridge) -[country]-> (United Kingdom) <-[located in the administrative territorial entity]- (Wales)" in text


def test_no_path_is_said_explicitly_with_the_ids(world):
    text = call(world, "KG_Path", "Douglas Adams", "Q830149").text
    assert text.startswith("No direct, 2-hop or 3-hop paths found between Q42 and Q830149")


# ------------------------------------------------------------------ Wiki_Evidence and Web_Evidence


def test_wiki_entity_mode_gives_summary_and_key_attributes(world):
    result = call(world, "Wiki_Evidence", "Douglas Adams")
    assert "Summary of Douglas Adams (wikipedia (local corpus), https://en.wikipedia.org/wiki/Douglas_Adams)" in result.text
    assert "best known for The Hitchhiker's Guide to the Galaxy" in result.text
    assert "Key attributes:\nDescription: English writer and humorist\nType: human" in result.text
    assert result.items[0].source == "https://en.wikipedia.org/wiki/Douglas_Adams"


def test_wiki_pair_mode_returns_sentences_mentioning_both(world):
    result = call(world, "Wiki_Evidence", "Douglas Adams", "Cambridge")
    assert result.text.splitlines()[0] == "Sentences mentioning both Douglas Adams and Cambridge:"
    texts = [i.text for i in result.items]
    assert "Adams was born in Cambridge." in texts
    assert all("Santa Barbara" not in t for t in texts)
    missing = call(world, "Wiki_Evidence", "Douglas Adams", "France")
    assert missing.text == "No encyclopedia sentence mentions both Douglas Adams (Q42) and France (Q142)."


def test_read_passage_gives_the_opening_of_the_article_on_one_line(world):
    result = call(world, "Read_Passage", "Douglas Adams")
    assert result.text.splitlines()[0] == ("Opening of Douglas Adams (wikipedia (local corpus), "
                                           "https://en.wikipedia.org/wiki/Douglas_Adams):")
    (item,) = result.items
    assert item.text.startswith("Douglas Noel Adams was an English author") and item.text.endswith("Santa Barbara.")
    assert item.payload["entities"] == ["Q42"] and item.source == "https://en.wikipedia.org/wiki/Douglas_Adams"
    assert call(world, "Read_Passage", "France").text == "No encyclopedia text about France (Q142) is available."
    assert not call(world, "Read_Passage", "Atlantis").ok


def test_an_article_opening_is_cut_at_a_word():
    long = "word " * 400 + "\n\nlast"
    opening = opening_of(long)
    assert opening.endswith(" …") and len(opening) <= OPENING_CHARS + 2 and "\n" not in opening
    assert opening_of("Short  text\nhere.") == "Short text here."


def test_hybrid_search_ranks_the_relevant_passage_first(world):
    hits = world.corpus.search("Eiffel Tower capital", limit=3)
    assert hits[0].entity_id == "Q90" and hits[0].score > 0
    # nothing matches lexically: nearest by meaning instead
    assert world.corpus.search("humorous novelist", limit=1)[0].entity_id == "Q42"


def test_web_evidence_without_a_provider_says_so(world):
    result = call(world, "Web_Evidence", "Where was Douglas Adams born?")
    assert not result.ok and "Web search is not configured" in result.text


def test_web_evidence_through_a_searxng_provider(world):
    from dataclasses import replace

    from tests.http_fixtures import LocalHTTPServer
    from verifier.evidence.web import SearxngProvider

    results = [
        {"url": "https://example.org/cambridge", "title": "Cambridge", "content": "A university city in England.", "engine": "x"},
        {"url": "https://example.org/adams", "title": "Douglas Adams",
         "content": "Douglas Adams was born in Cambridge, England, in 1952.", "engine": "x"},
    ]
    with LocalHTTPServer() as server:
        server.route("/search", {"query": "q", "number_of_results": 2, "results": results, "answers": [],
                                 "infoboxes": [], "suggestions": [], "unresponsive_engines": []})
        ctx = replace(world, web=SearxngProvider(server.url, timeout=2, retries=0))
        result = call(ctx, "Web_Evidence", "Where was Douglas Adams born?")
        assert server.requests[-1].param("q") == "Where was Douglas Adams born?"
    assert result.ok and result.text.startswith("Web results for 'Where was Douglas Adams born?' (searxng):")
    assert result.items[0].payload["url"] == "https://example.org/adams"  # re-ranked by meaning
    assert result.items[0].kind == "web" and result.items[0].source == "https://example.org/adams"
