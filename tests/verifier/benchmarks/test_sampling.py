"""Type-constrained negative sampling and relation-matched pairs: a negative never a KG triple, types kept, seedable."""

import random
from collections import Counter
from itertools import islice

import pytest

from verifier.benchmarks.datasets import BenchmarkError, build_benchmark
from verifier.benchmarks.sampling import (
    NegativeSampler,
    corrupted_pairs,
    declared_type_keys,
    relation_matched_pairs,
    relation_roles,
    relation_signature_keys,
)
from verifier.kg.loader import load_source
from verifier.kg.sources import read_tsv_triples
from verifier.models import Entity, KnowledgeGraph, Triple

# A toy KG: people born in cities, cities in countries.
KG = {("ada", "born_in", "london"), ("alan", "born_in", "london"), ("marie", "born_in", "warsaw"),
      ("london", "in", "uk"), ("warsaw", "in", "poland"), ("paris", "in", "france")}
TYPES = {"ada": ["human"], "alan": ["human"], "marie": ["human"], "london": ["city"], "warsaw": ["city"],
         "paris": ["city"], "uk": ["country"], "poland": ["country"], "france": ["country"], "lonely": ["planet"]}


def test_declared_types_negatives_keep_the_replaced_entity_type_and_avoid_kg_and_known_triples():
    keys = declared_type_keys(TYPES)
    known = {("ada", "born_in", "paris")}  # a true triple outside the KG must not become a "negative"
    sampler = NegativeSampler(keys, KG | known)
    rng = random.Random(7)
    negatives = [sampler.corrupt(t, rng) for t in [("pierre", "born_in", "paris"), ("ada", "born_in", "warsaw")] * 3]
    made = [n for n in negatives if n is not None]
    assert made, "some negatives must be drawn"
    for negative in made:
        assert negative.triple not in KG and negative.triple not in known
        head, relation, tail = negative.triple
        original = negative.source
        assert relation == original[1]
        if negative.replaced == "head":
            assert tail == original[2] and keys[head] == keys[original[0]] and head != original[0]
        else:
            assert head == original[0] and keys[tail] == keys[original[2]] and tail != original[2]
    assert len({n.triple for n in made}) == len(made)  # never the same negative twice


def test_an_entity_without_a_shared_type_is_never_replaced():
    sampler = NegativeSampler(declared_type_keys(TYPES), KG)
    assert not sampler.replaceable("lonely") and not sampler.replaceable("pierre")
    assert sampler.corrupt(("lonely", "orbits", "pierre"), random.Random(1)) is None


def test_relation_signatures_group_entities_by_the_relation_roles_they_play():
    keys = relation_signature_keys(KG)
    assert keys["ada"] == keys["alan"] == keys["marie"] == frozenset({("born_in", "head")})
    assert keys["london"] == keys["warsaw"] == frozenset({("born_in", "tail"), ("in", "head")})
    assert keys["paris"] == frozenset({("in", "head")})  # no one born there: a different type


def test_by_role_an_end_is_replaced_by_another_entity_the_kg_holds_in_that_role_of_the_relation():
    # By signature London and Warsaw share a type but Paris has its own (no one born there), and no person
    # shares Ada's: the role of "born_in" tails still offers London or Warsaw for any birthplace.
    sampler = NegativeSampler(relation_signature_keys(KG), KG, roles=relation_roles(KG))
    rng = random.Random(5)
    made = [sampler.corrupt(("pierre", "born_in", "paris"), rng, sides=("tail",)) for _ in range(2)]
    assert {n.triple for n in made} == {("pierre", "born_in", "london"), ("pierre", "born_in", "warsaw")}
    assert sampler.corrupt(("pierre", "born_in", "paris"), rng, sides=("tail",)) is None  # both drawn once
    head = sampler.corrupt(("ada", "in", "uk"), rng, sides=("head",))
    assert head.triple[0] in {"london", "warsaw", "paris"} and head.triple not in KG
    assert sampler.replaceable("paris") and not sampler.replaceable("pierre")
    assert sampler.corrupt(("ada", "orbits", "uk"), rng) is None  # a relation the KG does not hold


def test_sampling_is_reproducible_from_the_seed():
    def draw(seed):
        sampler = NegativeSampler(declared_type_keys(TYPES), KG)
        return corrupted_pairs(sorted(KG), 3, sampler, random.Random(seed))

    assert draw(3) == draw(3)
    assert any(draw(3) != draw(seed) for seed in range(4, 12))


def test_relation_matched_pairs_share_their_relation():
    positives = [("a", "r1", "b"), ("c", "r1", "d"), ("e", "r2", "f")]
    negatives = [("a", "r1", "x"), ("c", "r3", "y"), ("e", "r3", "z"), ("g", "r3", "w")]
    pairs = relation_matched_pairs(positives, negatives, 10, random.Random(0))
    assert len(pairs) == 1 and pairs[0][0][1] == pairs[0][1][1] == "r1"


@pytest.fixture
def fb15k_slice(tmp_path, data_dir, db):
    """The first 3,000 FB15k-237 training triples as a KG, and later training triples among its entities as positives."""
    with (data_dir / "fb15k-237" / "train.txt").open(encoding="utf-8") as handle:
        lines = [line.rstrip("\r\n") for line in islice(handle, 20_000)]
    kg_lines, rest = lines[:3000], lines[3000:]
    (tmp_path / "fb-slice.tsv").write_text("\n".join(kg_lines) + "\n", encoding="utf-8")
    kg = load_source(read_tsv_triples(tmp_path / "fb-slice.tsv", name="fb-slice"), embed=False).kg
    entities = {part for line in kg_lines for part in line.split("\t")[::2]}
    relations = {line.split("\t")[1] for line in kg_lines}
    positives = [line for line in rest
                 if {line.split("\t")[0], line.split("\t")[2]} <= entities and line.split("\t")[1] in relations][:300]
    path = tmp_path / "positives.tsv"
    path.write_text("\n".join(positives) + "\n", encoding="utf-8")
    return kg, path


@pytest.mark.slow
def test_fb15k_negatives_are_never_kg_triples_and_keep_the_relation_signature(fb15k_slice):
    kg, positives = fb15k_slice
    benchmark = build_benchmark(str(positives), n=80, seed=11, kg_name=kg.name)
    assert benchmark.notes["type_scheme"] == "signature"
    assert benchmark.notes["caveat"].startswith("The negatives are not checked")  # the evaluation page says so
    triples = benchmark.triples
    assert len(triples) == 80 and sum(t.label for t in triples) == 40
    in_kg = set(Triple.objects.filter(kg=kg).values_list("head_id", "relation_id", "tail_id"))
    signature = relation_signature_keys(in_kg)
    positives_by_pair = {}
    for positive, negative in zip(triples[::2], triples[1::2], strict=True):
        assert positive.label and not negative.label
        assert negative.key not in in_kg and negative.key not in {t.key for t in triples if t.label}
        assert positive.relation_id == negative.relation_id
        changed = [i for i in (0, 2) if positive.key[i] != negative.key[i]]
        assert len(changed) == 1  # exactly one end replaced …
        assert signature[positive.key[changed[0]]] == signature[negative.key[changed[0]]]  # … by an entity of the same type
        positives_by_pair[positive.key] = negative.key
    again = build_benchmark(str(positives), n=80, seed=11, kg_name=kg.name)
    assert [t.key for t in again.triples] == [t.key for t in triples]
    other = build_benchmark(str(positives), n=80, seed=12, kg_name=kg.name)
    assert [t.key for t in other.triples] != [t.key for t in triples]


def test_codex_pairs_are_relation_matched_and_kg_facts_may_be_drawn(data_dir, tmp_path, db):
    source = data_dir / "codex-s" / "triples"
    kg_lines = (source / "train.txt").read_text(encoding="utf-8").splitlines()[:8000]
    (tmp_path / "kg.tsv").write_text("\n".join(kg_lines) + "\n")
    kg = load_source(read_tsv_triples(tmp_path / "kg.tsv", name="codex-pairs"), embed=False).kg
    entities = {part for line in kg_lines for part in line.split("\t")[::2]}

    def known(name):  # the real valid positives / hard negatives over the entities of this KG
        lines = (source / name).read_text(encoding="utf-8").splitlines()
        return [line for line in lines if set(line.split("\t")[::2]) <= entities]

    folder = tmp_path / "codex-s" / "triples"
    folder.mkdir(parents=True)
    # Three KG facts among the positives: drawn like any other (each is scored by the network that never learnt it).
    (folder / "valid.txt").write_text("\n".join(known("valid.txt") + kg_lines[:3]) + "\n")
    (folder / "valid_negatives.txt").write_text("\n".join(known("valid_negatives.txt")) + "\n")
    benchmark = build_benchmark("codex-s", n=40, seed=5, kg_name=kg.name, data_dir=tmp_path)
    assert len(benchmark.triples) == 40 and benchmark.notes["dropped_fitted"] == 0
    labels_by_relation = Counter((t.relation_id, t.label) for t in benchmark.triples)
    for (relation, label), count in labels_by_relation.items():
        assert labels_by_relation[(relation, not label)] == count  # as many true as false per relation
    in_kg = set(Triple.objects.filter(kg=kg).values_list("head_id", "relation_id", "tail_id"))
    assert all(t.label for t in benchmark.triples if t.key in in_kg)  # the negatives are not the KG's facts


def test_declared_types_drive_sampling_on_a_typed_kg(codex_subset, tmp_path, db):
    from verifier.kg.sources import read_codex

    kg = load_source(read_codex(codex_subset, name="codex-typed"), embed=False).kg
    train = (codex_subset / "triples" / "train.txt").read_text(encoding="utf-8").splitlines()
    held_out, kg_part = train[:40], train[40:]
    Triple.objects.filter(kg=kg, head__external_id__in=[line.split("\t")[0] for line in held_out]).delete()
    path = tmp_path / "positives.tsv"
    path.write_text("\n".join(held_out) + "\n")
    benchmark = build_benchmark(str(path), n=30, seed=1, kg_name=kg.name)
    assert benchmark.notes["type_scheme"] == "declared" and kg_part
    types = {pk: frozenset(t) for pk, t in Entity.objects.filter(kg=kg).values_list("id", "types")}
    in_kg = set(Triple.objects.filter(kg=kg).values_list("head_id", "relation_id", "tail_id"))
    for positive, negative in zip(benchmark.triples[::2], benchmark.triples[1::2], strict=True):
        assert negative.key not in in_kg
        (changed,) = [i for i in (0, 2) if positive.key[i] != negative.key[i]]
        assert types[positive.key[changed]] == types[negative.key[changed]] and types[negative.key[changed]]


def test_a_test_split_benchmarks_its_own_pairs_and_never_calls_a_validation_fact_false(data_dir, tmp_path, db, settings):
    from verifier.structure.fitting import labelled_dataset

    source = data_dir / "codex-s" / "triples"
    kg_lines = (source / "train.txt").read_text(encoding="utf-8").splitlines()[:8000]
    (tmp_path / "kg.tsv").write_text("\n".join(kg_lines) + "\n")
    kg = load_source(read_tsv_triples(tmp_path / "kg.tsv", name="codex-split"), embed=False).kg
    entities = {part for line in kg_lines for part in line.split("\t")[::2]}
    positives = [line for line in (source / "valid.txt").read_text(encoding="utf-8").splitlines()
                 if set(line.split("\t")[::2]) <= entities]
    negatives = [line for line in (source / "valid_negatives.txt").read_text(encoding="utf-8").splitlines()
                 if set(line.split("\t")[::2]) <= entities]
    folder = tmp_path / "codex-s" / "triples"
    folder.mkdir(parents=True)
    settings.KGV_DATA_DIR = tmp_path
    with pytest.raises(BenchmarkError, match="codex-s-test needs codex-s/triples/test.txt and .* without its test split"):
        build_benchmark("codex-s-test", n=20, seed=0, kg_name=kg.name, data_dir=tmp_path)

    # the real validation pairs cut in two: the first half stays validation, the second becomes a test split whose
    # negatives also hold the first half's positives (true facts of the dataset, never to be drawn as false)
    half = len(positives) // 2
    (folder / "test.txt").write_text("\n".join(positives[half:]) + "\n")
    (folder / "test_negatives.txt").write_text("\n".join(negatives + positives[:half]) + "\n")
    codex = KnowledgeGraph(name="codex-s")  # what a calibration of the loaded CoDEx-S would be fitted on
    assert labelled_dataset(codex) is None  # a test split alone is nothing to fit on
    (folder / "valid.txt").write_text("\n".join(positives[:half]) + "\n")
    (folder / "valid_negatives.txt").write_text("\n".join(negatives) + "\n")
    assert labelled_dataset(codex).split == "valid"

    benchmark = build_benchmark("codex-s-test", n=60, seed=2, kg_name=kg.name, data_dir=tmp_path)
    validation_true = {tuple(line.split("\t")) for line in positives[:half]}
    external = dict(Entity.objects.filter(kg=kg).values_list("id", "external_id"))
    relation = dict(kg.relations.values_list("id", "external_id"))
    drawn = {t: (external[t.head_id], relation[t.relation_id], external[t.tail_id]) for t in benchmark.triples}
    assert len(drawn) == 60 and sum(t.label for t in drawn) == 30
    assert all(t.origin.startswith("test.txt:") for t in drawn if t.label)
    assert all(t.origin.startswith("test_negatives.txt:") and key not in validation_true for t, key in drawn.items() if not t.label)
    validation = build_benchmark("codex-s", n=60, seed=2, kg_name=kg.name, data_dir=tmp_path)
    assert all(t.origin.startswith("valid") for t in validation.triples)
