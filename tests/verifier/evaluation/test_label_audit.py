"""``manage.py audit_labels``: a blind sample of an evaluation's negatives that grows without repeats, and the
judged sample set against the verdicts."""

from __future__ import annotations

import csv
import itertools

import pytest
from django.core.management import CommandError, call_command

from verifier.evaluation import label_audit
from verifier.models import Evaluation, EvaluationItem, Run, VerificationTask

pytestmark = pytest.mark.django_db


@pytest.fixture
def evaluation(world_kg):
    """Twelve negatives and four positives; the verdict of negative i is Correct for i < 5, Incorrect after."""
    evaluation = Evaluation.objects.create(name="audited", kg=world_kg, benchmark="fb15k-237", sample_size=16, mode="agent")
    entities, relations = list(world_kg.entities.all()), list(world_kg.relations.all())
    triples = [(h, r, t) for h, r, t in itertools.product(entities, relations, entities) if h != t][:16]
    for position, (head, relation, tail) in enumerate(triples):
        negative = position < 12
        task = VerificationTask.objects.create(kg=world_kg, head=head, relation=relation, tail=tail)
        verdict = "correct" if (not negative or position < 5) else "incorrect"
        run = Run.objects.create(task=task, status=Run.Status.SUCCEEDED, verdict=verdict)
        EvaluationItem.objects.create(evaluation=evaluation, task=task, expected_label=not negative, position=position, run=run)
    return evaluation


def _rows(path):
    with path.open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


def _judge(path, judgement_of):
    """Mark every row of the audit file with ``judgement_of(row)`` and a reason."""
    rows = _rows(path)
    for row in rows:
        row["judgement"], row["reason"] = judgement_of(row), "read by hand"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=label_audit.COLUMNS, delimiter="\t")
        writer.writeheader()
        writer.writerows(rows)


def test_the_sample_is_blind_grows_without_repeats_and_stops_when_every_negative_is_drawn(evaluation, tmp_path, capsys):
    path = tmp_path / "audit.tsv"
    call_command("audit_labels", "audited", write=path, sample=5, seed=1)
    first = _rows(path)
    assert len(first) == 5 and set(first[0]) == set(label_audit.COLUMNS)
    assert all(row["judgement"] == "" and row["reason"] == "" and row["head_label"] for row in first)
    negatives = set(label_audit.negatives(evaluation))
    assert {(r["head"], r["relation"], r["tail"]) for r in first} <= negatives  # never a positive
    assert "5 of 12 negatives of audited written" in capsys.readouterr().out
    assert "verdict" not in open(path).read().lower()  # nothing of the agent's answer reaches the reader

    call_command("audit_labels", "audited", write=path, sample=10, seed=2)
    grown = _rows(path)
    assert grown[:5] == first and len(grown) == 12  # appended after the judged rows, 7 left to draw
    assert {(r["head"], r["relation"], r["tail"]) for r in grown} == negatives
    assert "7 of 12 negatives of audited written" in capsys.readouterr().out
    with pytest.raises(CommandError, match="already holds all 12 negatives"):
        call_command("audit_labels", "audited", write=path, sample=1)


def test_the_judged_sample_is_set_against_the_verdicts(evaluation, tmp_path, capsys):
    path = tmp_path / "audit.tsv"
    call_command("audit_labels", "audited", write=path, sample=12)
    items = label_audit.negatives(evaluation)
    said_correct = {key for key, item in items.items() if item.run.verdict == "correct"}
    # the five negatives answered Correct: three judged true, one likely true, one false; the seven answered
    # Incorrect: one judged true, one unsure, five false
    order = iter(["true", "true", "true", "likely true", "false"])
    rest = iter(["true", "unsure", "false", "false", "false", "false", "false"])
    by_key = {key: next(order) if key in said_correct else next(rest) for key in items}
    _judge(path, lambda row: by_key[(row["head"], row["relation"], row["tail"])])

    result = label_audit.audit(evaluation, label_audit.read_judged(path))
    assert (result.n, result.not_in_evaluation) == (12, 0)
    assert result.judgements == {"true": 4, "likely true": 1, "unsure": 1, "false": 6}
    assert result.verdicts["true"] == {"correct": 3, "incorrect": 1}
    assert result.right_by_label == 7  # Incorrect on 7 of the 12 negatives
    # true counted true: 3 Correct on true + 5 Incorrect on false, of 4 + 6 settled; with likely true: 9 of 11
    assert result.by_judged == [(("true",), 8, 10), (("true", "likely true"), 9, 11)]
    assert (result.errors, result.errors_judged_true) == (5, 4)

    call_command("audit_labels", "audited", judged=path)
    out = capsys.readouterr().out
    assert "12 judged negatives of audited" in out
    assert "right by the dataset's label (false): 7/12 = 58.3%" in out
    assert "right by the judged label, true counted true, the rest left out: 8/10 = 80.0%" in out
    assert "of the 5 counted errors (Correct on a negative), judged true or likely true: 4" in out


def test_a_row_without_a_judgement_is_named_with_its_line_and_nothing_is_reported(evaluation, tmp_path):
    path = tmp_path / "audit.tsv"
    call_command("audit_labels", "audited", write=path, sample=3)
    labels = iter(["false", "maybe", ""])
    _judge(path, lambda row: next(labels))
    with pytest.raises(CommandError) as refused:
        call_command("audit_labels", "audited", judged=path)
    message = str(refused.value)
    assert "2 row(s)" in message and "line 3: 'maybe'" in message and "line 4: 'no judgement'" in message


def test_a_file_that_is_not_an_audit_or_holds_none_of_the_negatives_is_refused(evaluation, tmp_path):
    other = tmp_path / "other.tsv"
    other.write_text("head\trelation\ttail\nQ1\tP1\tQ2\n")
    with pytest.raises(CommandError, match="lacks the column"):
        call_command("audit_labels", "audited", judged=other)
    with pytest.raises(CommandError, match="no file"):
        call_command("audit_labels", "audited", judged=tmp_path / "missing.tsv")
    stranger = tmp_path / "stranger.tsv"
    stranger.write_text("\t".join(label_audit.COLUMNS) + "\nQ1\tP1\tQ2\ta\tb\tc\tfalse\tx\n")
    with pytest.raises(CommandError, match="none of the 1 judged rows is a negative of the evaluation audited"):
        call_command("audit_labels", "audited", judged=stranger)
    with pytest.raises(CommandError, match="no folder"):
        call_command("audit_labels", "audited", write=tmp_path / "missing" / "audit.tsv")
    with pytest.raises(CommandError, match="lacks the column"):
        call_command("audit_labels", "audited", write=other)  # never appended to a file that is not an audit
    assert other.read_text() == "head\trelation\ttail\nQ1\tP1\tQ2\n"
    with pytest.raises(CommandError, match="no evaluation 'nowhere'"):
        call_command("audit_labels", "nowhere", judged=stranger)
