from pathlib import Path

import pytest

from verifier.kg.sources import SourceError, detect_source, read_tsv_triples


def test_codex_folder_is_read_with_names_terms_types_and_passages(codex_subset):
    source = detect_source(codex_subset)
    assert source.name == "codex-s" and not source.problems
    triples = list(source.triples())
    assert len(triples) == 200
    entities = {e.external_id: e for e in source.entities}
    assert {h for h, _, _ in triples} <= set(entities)
    with_aliases = [e for e in entities.values() if e.aliases]
    assert with_aliases and all(e.description for e in with_aliases)
    assert all(e.types for e in entities.values())
    assert len(source.passages) == len(entities)
    lengths = sorted(len(p.text) for p in source.passages)
    assert lengths[0] > 0 and lengths[len(lengths) // 2] > 500, "Wikipedia extracts, not names"


@pytest.mark.slow
def test_fb15k_folder_is_recognised(data_dir):
    source = detect_source(data_dir / "fb15k-237")
    assert source.name == "fb15k-237"
    head, relation, tail = next(source.triples())
    assert head.startswith("/m/") and relation.startswith("/") and tail.startswith("/m/")
    assert not head.endswith("\r") and not tail.endswith("\r"), "CRLF line ends are stripped"
    denton = next(e for e in source.entities if e.external_id == "/m/010016")
    assert denton.label == "Denton" and denton.description == "city in Texas, United States"
    acted = next(r for r in source.relations if r.external_id == "/film/actor/film./film/performance/film")
    assert (acted.label, acted.description) == ("appeared in film", "An actor or person to a film they performed in.")
    assert acted.aliases == ["film actor film. film performance film"], "the dataset's phrase stays an alias"


def test_fb15k_relations_all_have_readable_unique_labels(data_dir):
    source = detect_source(data_dir / "fb15k-237")
    assert len(source.relations) == 237 and not source.problems
    labels = [r.label for r in source.relations]
    assert len(set(labels)) == len(labels), "a label names one relation"
    assert all(r.description and "." not in r.label for r in source.relations), "no relation keeps a Freebase path phrase"


def test_malformed_tsv_lines_are_reported_with_file_and_line(tmp_path):
    path = tmp_path / "bad.tsv"
    path.write_text("a\tr\tb\nonly two\tfields\n\nc\tr\t\nd\tr\te\n", encoding="utf-8")
    source = read_tsv_triples(path, name="bad")
    assert list(source.triples()) == [("a", "r", "b"), ("d", "r", "e")]
    assert [(p.line, p.path) for p in source.problems] == [(2, path), (4, path)]
    assert "bad.tsv:2: expected 3 tab-separated" in str(source.problems[0])


def test_ntriples_statements_literals_and_escapes(tmp_path):
    path = tmp_path / "graph.nt"
    path.write_text(
        "<http://www.wikidata.org/entity/Q42> <http://www.wikidata.org/prop/direct/P27> <http://www.wikidata.org/entity/Q145> .\n"
        '<http://www.wikidata.org/entity/Q42> <http://www.w3.org/2000/01/rdf-schema#label> "Douglas Adams"@en .\n'
        '<http://www.wikidata.org/entity/Q42> <http://www.w3.org/2000/01/rdf-schema#label> "Douglas Adams (de)"@de .\n'
        '<http://www.wikidata.org/entity/Q42> <http://schema.org/description> "writer \\"42\\" \\u00e9"@en .\n'
        '<http://www.wikidata.org/entity/Q42> <http://www.w3.org/2004/02/skos/core#altLabel> "Douglas Noel Adams"@en .\n'
        "<http://www.wikidata.org/entity/Q42> <http://www.wikidata.org/prop/direct/P31> <http://www.wikidata.org/entity/Q5> .\n"
        '<http://www.wikidata.org/prop/direct/P27> <http://www.w3.org/2000/01/rdf-schema#label> "country of citizenship" .\n'
        '_:b1 <http://example.org/p> "12"^^<http://www.w3.org/2001/XMLSchema#integer> .\n'
        "# a comment\n"
        "<http://www.wikidata.org/entity/Q42> <broken\n",
        encoding="utf-8",
    )
    source = detect_source(path)
    assert list(source.triples()) == [("Q42", "P27", "Q145")]
    q42 = next(e for e in source.entities if e.external_id == "Q42")
    assert q42.label == "Douglas Adams"
    assert q42.description == 'writer "42" é'
    assert q42.aliases == ["Douglas Noel Adams"] and q42.types == ["Q5"]
    assert [(r.external_id, r.label) for r in source.relations] == [("P27", "country of citizenship")]
    assert [p.line for p in source.problems] == [10]


def test_unknown_paths_and_formats_are_refused(tmp_path):
    with pytest.raises(SourceError, match="does not exist"):
        detect_source(tmp_path / "missing.tsv")
    (tmp_path / "graph.xml").write_text("<rdf/>")
    with pytest.raises(SourceError, match="unknown format"):
        detect_source(tmp_path / "graph.xml")
    with pytest.raises(SourceError, match="neither a CoDEx-S nor an FB15k-237 folder"):
        detect_source(Path(tmp_path))
