import pytest

from verifier.kg.store import PostgresKG
from verifier.models import KnowledgeGraph
from verifier.tools import registry
from verifier.tools.cache import DjangoToolCache
from verifier.tools.registry import Toolbox, available, describe, tool


def test_each_tool_is_declared_once_with_schema_from_signature_and_docstring():
    specs = {s.name: s for s in available()}
    assert set(specs) == {"KG_Definition", "KG_Neighbor", "KG_Path", "KG_Plausibility", "KG_Rules", "Read_Sentences",
                          "Read_Passage", "Wiki_Evidence", "Web_Evidence"}
    neighbor = specs["KG_Neighbor"].openai_tool()["function"]
    assert neighbor["name"] == "KG_Neighbor"
    assert neighbor["description"].startswith("List up to 20 facts")
    assert neighbor["parameters"]["required"] == ["entity"]
    assert set(neighbor["parameters"]["properties"]) == {"entity", "relation"}
    assert specs["KG_Path"].signature == "KG_Path(entity_a, entity_b)"
    assert "- Wiki_Evidence(entity_a, entity_b?):" in describe(list(specs.values()))


def test_ablation_switches_select_tool_categories():
    kg, structural, external = ({"KG_Definition", "KG_Neighbor", "KG_Path"}, {"KG_Plausibility", "KG_Rules"},
                                {"Read_Sentences", "Read_Passage", "Wiki_Evidence", "Web_Evidence"})
    assert {s.name for s in available(kg_tools=False)} == structural | external
    assert {s.name for s in available(external_tools=False)} == kg | structural
    assert {s.name for s in available(structural_tools=False)} == kg | external


def test_undocumented_or_untyped_arguments_are_refused_at_declaration():
    with pytest.raises(TypeError, match="not described under Args"):
        @tool("Broken", category="kg")
        def broken(ctx, thing: str):
            """Does things."""

    with pytest.raises(TypeError, match="must be typed str"):
        @tool("Broken2", category="kg")
        def broken2(ctx, count: int):
            """Does things.

            Args:
                count: how many
            """
    assert "Broken" not in registry.TOOLS and "Broken2" not in registry.TOOLS


@pytest.mark.django_db
def test_unknown_tools_and_bad_arguments_come_back_as_observations(world):
    box = Toolbox(world)
    unknown = box.call("KG_Lookup", ["x"])
    assert not unknown.ok and "Unknown tool 'KG_Lookup'. Valid tools:" in unknown.text and "KG_Path(entity_a, entity_b)" in unknown.text
    too_many = box.call("KG_Definition", ["a", "b"])
    assert not too_many.ok and "takes at most 1 argument(s), got 2" in too_many.text and "Usage: KG_Definition(name)" in too_many.text
    wrong_name = box.call("KG_Path", {"source": "Q42", "entity_b": "Q145"})
    assert "KG_Path has no argument 'source'" in wrong_name.text
    missing = box.call("KG_Path", {"entity_a": "Q42"})
    assert "KG_Path needs entity_b" in missing.text
    # Keyword arguments and a loosely written tool name work.
    assert box.call("kg path", {"entity_a": "Q42", "entity_b": "Q350"}).ok


@pytest.mark.django_db
def test_results_are_cached_per_run_and_across_runs_per_kg_version(world, world_kg):
    shared = DjangoToolCache()
    first = Toolbox(world, shared_cache=shared)
    fresh = first.call("KG_Neighbor", ["Douglas Adams"])
    assert not fresh.cached
    assert first.call("KG_Neighbor", ["Douglas Adams"]).cached  # same run
    other_run = Toolbox(world, shared_cache=shared)
    again = other_run.call("KG_Neighbor", ["Douglas Adams"])
    assert again.cached and again.text == fresh.text and again.items == fresh.items  # from Redis
    # A reloaded KG (new version) is not answered from the cache.
    KnowledgeGraph.objects.filter(pk=world_kg.pk).update(version=world_kg.version + 1)
    world.kg = PostgresKG(KnowledgeGraph.objects.get(pk=world_kg.pk))
    assert not Toolbox(world, shared_cache=shared).call("KG_Neighbor", ["Douglas Adams"]).cached


@pytest.mark.django_db
def test_an_unreachable_tool_cache_only_costs_the_cache_the_tool_call_still_answers(world, world_kg):
    import socket

    from django.core.cache.backends.redis import RedisCache

    with socket.socket() as probe:  # a port nothing listens on: every cache call is refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    shared = DjangoToolCache()
    shared.cache = RedisCache(f"redis://127.0.0.1:{port}/0", {})
    result = Toolbox(world, shared_cache=shared).call("KG_Neighbor", ["Douglas Adams"])
    assert not result.cached and "Douglas Adams" in result.text
    assert shared.get("kgv:tool:missing") is None
