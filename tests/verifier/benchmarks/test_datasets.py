"""Benchmarks from labelled files: bad rows are reported (all of them, with line numbers), good files sampled."""

import pytest
from django.core.management import CommandError, call_command

from verifier.benchmarks.datasets import BenchmarkError, build_benchmark
from verifier.kg.loader import ImportRejected
from verifier.models import Evaluation

pytestmark = pytest.mark.django_db


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_dataset_file_with_bad_rows_is_rejected_listing_every_bad_row(world_kg, tmp_path):
    path = write(tmp_path, "labelled.csv", "\n".join([
        "head,relation,tail,label",
        "Douglas Adams,country of citizenship,United Kingdom,true",  # 2: fine
        "Douglas Adams,place of birth,Cambridge,maybe",  # 3: bad label
        "Douglas Adams,place of birth",  # 4: too few columns
        "Douglas Adams,educated at,Oxford,false",  # 5: unknown entity
        "Q42,P27,Q142,",  # 6: no label while the others have one
        "Q42,P27,Q145,false",  # 7: the triple of line 2 with the other label
        "Paris,country,France,true",  # 8: ambiguous name (two entities called Paris)
    ]) + "\n")
    with pytest.raises(ImportRejected) as caught:
        build_benchmark(str(path), n=10, seed=0, kg_name=world_kg.name)
    lines = {problem.line: problem.message for problem in caught.value.problems}
    assert sorted(lines) == [3, 4, 5, 6, 7, 8]
    assert "'maybe'" in lines[3] and "3 or 4 columns" in lines[4] and "'Oxford' is not in the KG" in lines[5]
    assert "no label" in lines[6] and "labelled True on line 2" in lines[7] and "ambiguous" in lines[8]
    assert "labelled.csv:5" in str(caught.value)


def test_the_evaluate_command_reports_bad_rows_and_creates_nothing(world_kg, tmp_path):
    path = write(tmp_path, "bad.tsv", "Q42\tP27\tQ145\ttrue\nQ42\tP19\tNowhere\tfalse\n")
    with pytest.raises(CommandError, match=r"bad\.tsv:2: 'Nowhere' is not in the KG"):
        call_command("evaluate", benchmark=str(path), kg=world_kg.name, n=2, mode="zero-shot", no_progress=True)
    assert not Evaluation.objects.exists()


def test_labelled_rows_are_sampled_with_their_labels(world_kg, tmp_path):
    path = write(tmp_path, "good.tsv", "\n".join([
        "Q42\tP27\tQ145\ttrue", "Q42\tP27\tQ142\tfalse", "Q350\tP17\tQ145\tcorrect", "Q90\tP17\tQ145\tincorrect",
        "Q42\tP27\tQ145\ttrue",  # a repeated row counts once
    ]) + "\n")
    everything = build_benchmark(str(path), n=10, seed=0, kg_name=world_kg.name)
    assert [(t.label, t.origin) for t in everything.triples] == [
        (True, "good.tsv:1"), (False, "good.tsv:2"), (True, "good.tsv:3"), (False, "good.tsv:4")]
    some = build_benchmark(str(path), n=2, seed=3, kg_name=world_kg.name)
    assert len(some.triples) == 2 and {t.key for t in some.triples} < {t.key for t in everything.triples}


def test_unknown_benchmarks_and_missing_kg_are_explained(world_kg, tmp_path):
    with pytest.raises(BenchmarkError, match="unknown benchmark 'nope'"):
        build_benchmark("nope", n=10, seed=0)
    with pytest.raises(BenchmarkError, match="needs --kg"):
        build_benchmark(str(write(tmp_path, "x.tsv", "Q42\tP27\tQ145\n")), n=10, seed=0)
    with pytest.raises(BenchmarkError, match="is not loaded"):
        build_benchmark("fb15k-237", n=10, seed=0, kg_name="not-there")
