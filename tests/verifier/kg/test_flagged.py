import pytest
from django.core.management import CommandError, call_command

from verifier.kg.loader import ImportRejected, load_source
from verifier.kg.sources import EntityRecord, KGSource, RelationRecord, read_tsv_triples
from verifier.models import AuditEvent, VerificationTask
from verifier.services import import_flagged_triples

pytestmark = pytest.mark.django_db


@pytest.fixture
def kg():
    triples = [("Q42", "P27", "Q145"), ("Q1", "P27", "Q145")]
    source = KGSource(
        name="names",
        title="names",
        description="",
        triples=lambda: iter(triples),
        entities=[
            EntityRecord("Q42", "Douglas Adams", "English writer", ["Douglas Noel Adams"]),
            EntityRecord("Q145", "United Kingdom", "country in Europe", ["UK"]),
            EntityRecord("Q1", "Paris", "capital of France"),
            EntityRecord("Q2", "Paris", "city in Texas"),
        ],
        relations=[RelationRecord("P27", "country of citizenship", aliases=["citizenship"])],
    )
    return load_source(source, embed=False).kg


def _file(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_rows_by_label_alias_or_id_become_pending_tasks(kg, tmp_path):
    path = _file(tmp_path, "flagged.csv", "head,relation,tail,label\nDouglas Adams,country of citizenship,UK,true\nQ42,P27,Q1,false\n")
    report = import_flagged_triples(kg=kg, path=path)
    assert (report.created, report.already_queued) == (2, 0)
    tasks = VerificationTask.objects.filter(kg=kg).order_by("source")
    assert [(t.head.external_id, t.relation.external_id, t.tail.external_id, t.expected_label) for t in tasks] == [
        ("Q42", "P27", "Q145", True),
        ("Q42", "P27", "Q1", False),
    ]
    assert all(t.status == VerificationTask.Status.PENDING for t in tasks)
    assert tasks[0].source == "flagged.csv:2"
    assert AuditEvent.objects.filter(action="tasks.import", object_id=str(kg.pk)).exists()


def test_tsv_without_header_and_reimport_skips_queued_triples(kg, tmp_path):
    path = _file(tmp_path, "flagged.tsv", "douglas adams\tcitizenship\tUnited Kingdom\n")
    assert import_flagged_triples(kg=kg, path=path).created == 1
    again = import_flagged_triples(kg=kg, path=path)
    assert (again.created, again.already_queued) == (0, 1)


def test_unknown_and_ambiguous_names_reject_the_file_with_line_numbers(kg, tmp_path):
    path = _file(
        tmp_path,
        "flagged.csv",
        "Douglas Adams,country of citizenship,UK\nDouglas Adams,country of citizenship,Paris\nNobody,P27,UK\nonly,two\n",
    )
    with pytest.raises(ImportRejected) as rejected:
        import_flagged_triples(kg=kg, path=path)
    message = str(rejected.value)
    assert "flagged.csv:2: 'Paris' is ambiguous (2 matches: Q1 (Paris: capital of France); Q2 (Paris: city in Texas))" in message
    assert "flagged.csv:3: 'Nobody' is not in the KG" in message
    assert "flagged.csv:4: expected 3 or 4 columns" in message
    assert not VerificationTask.objects.filter(kg=kg).exists()


def test_an_unknown_name_comes_with_the_closest_names_of_the_kg(kg, tmp_path):
    path = _file(tmp_path, "flagged.csv", "Douglas Adamz,country of citizenshp,UK\nDouglas Adams,P27,Xyzzy\n")
    with pytest.raises(ImportRejected) as rejected:
        import_flagged_triples(kg=kg, path=path)
    message = str(rejected.value)
    assert "flagged.csv:1: 'Douglas Adamz' is not in the KG — did you mean Douglas Adams (Q42)?" in message
    assert "'country of citizenshp' is not in the KG — did you mean country of citizenship (P27)?" in message
    assert "flagged.csv:2: 'Xyzzy' is not in the KG" in message and "Xyzzy' is not in the KG —" not in message


def test_skip_invalid_queues_the_good_rows(kg, tmp_path):
    path = _file(tmp_path, "flagged.csv", "Douglas Adams,P27,UK\nNobody,P27,UK\n")
    assert import_flagged_triples(kg=kg, path=path, skip_invalid=True).created == 1


def test_bad_labels_are_reported(kg, tmp_path):
    path = _file(tmp_path, "flagged.csv", "Q42,P27,Q145,perhaps\n")
    with pytest.raises(ImportRejected, match="label 'perhaps' is not one of"):
        import_flagged_triples(kg=kg, path=path)


def test_import_tasks_command(kg, tmp_path):
    path = _file(tmp_path, "flagged.csv", "Q42,P27,Q145\n")
    call_command("import_tasks", "names", str(path))
    assert VerificationTask.objects.filter(kg=kg).count() == 1
    with pytest.raises(CommandError, match="no loaded KG named 'nope'"):
        call_command("import_tasks", "nope", str(path))


def test_import_tasks_sample_queues_labelled_validation_triples(tmp_path, settings):
    """``--sample N``: N triples of the KG's validation split, half true with type-constrained negatives, labelled,
    each task naming its line; asking again queues nothing new."""
    (tmp_path / "kg.tsv").write_text("".join(f"{h}\tborn_in\t{t}\n" for h, t in [
        ("ada", "london"), ("alan", "london"), ("marie", "warsaw"), ("bob", "paris"), ("carl", "london")]))
    kg = load_source(read_tsv_triples(tmp_path / "kg.tsv", name="fb15k-237"), embed=False).kg
    (tmp_path / "fb15k-237").mkdir()
    (tmp_path / "fb15k-237" / "valid.txt").write_text("carl\tborn_in\tparis\nbob\tborn_in\twarsaw\n")
    settings.KGV_DATA_DIR = tmp_path
    call_command("import_tasks", "fb15k-237", "--sample", "4")
    tasks = list(VerificationTask.objects.filter(kg=kg).select_related("head", "tail"))
    assert len(tasks) == 4 and sorted(t.expected_label for t in tasks) == [False, False, True, True]
    true = {(t.head.external_id, t.tail.external_id) for t in tasks if t.expected_label}
    assert true == {("carl", "paris"), ("bob", "warsaw")}
    assert all(t.source.startswith("fb15k-237 sample: valid.txt:") for t in tasks)
    assert AuditEvent.objects.filter(action="tasks.import", after__sample="fb15k-237", after__created=4).exists()
    call_command("import_tasks", "fb15k-237", "--sample", "4")
    assert VerificationTask.objects.filter(kg=kg).count() == 4


def test_import_tasks_sample_needs_a_dataset_kg_and_excludes_a_file(kg, tmp_path):
    with pytest.raises(CommandError, match="names is not a dataset with a validation split"):
        call_command("import_tasks", "names", "--sample", "4")
    with pytest.raises(CommandError, match="either a file of flagged triples or --sample"):
        call_command("import_tasks", "names", str(_file(tmp_path, "flagged.csv", "Q42,P27,Q145\n")), "--sample", "4")
    with pytest.raises(CommandError, match="either a file of flagged triples or --sample"):
        call_command("import_tasks", "names")
    assert not VerificationTask.objects.filter(kg=kg).exists()


def test_a_flagged_triple_an_evaluation_created_joins_the_work_queue(kg, tmp_path):
    """The curator flagged it: it must stand in the work queue, not stay hidden among an evaluation's tasks."""
    from verifier.queue_filters import by_origin

    q42, q145 = (kg.entities.get(external_id=e).pk for e in ("Q42", "Q145"))
    task = VerificationTask.objects.create(kg=kg, head_id=q42, relation=kg.relations.get(), tail_id=q145,
                                           expected_label=True, source="evaluation:bench (valid.txt:3)")
    assert not by_origin(VerificationTask.objects.filter(kg=kg)).exists()
    report = import_flagged_triples(kg=kg, path=_file(tmp_path, "flagged.csv", "Q1,P27,Q145\nQ42,P27,Q145\n"))
    assert (report.created, report.already_queued) == (2, 0)
    task.refresh_from_db()
    assert task.source == "flagged.csv:2" and task.expected_label is True
    assert by_origin(VerificationTask.objects.filter(kg=kg)).count() == 2
