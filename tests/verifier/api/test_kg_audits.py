"""KG audits and onboardings over the API, on a small generated KG audited for real: list, start (refused while one
runs), read with its metrics and summary, page through the suspects by relation, queue the top ones, download the CSV;
upload a KG file to onboard (refused with the reason, nothing kept, for a bad name or file) and follow it."""

from __future__ import annotations

import csv
import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from tests.verifier.api.error_shape import assert_error
from tests.verifier.kg_audit.test_audit import noisy  # noqa: F401  (fixture)
from verifier.kg_audit.pipeline import run_here, start_audit
from verifier.models import AuditEvent, KGAudit, KnowledgeGraph, Onboarding, Suspect, VerificationTask

pytestmark = pytest.mark.django_db


@pytest.fixture
def audit(noisy) -> KGAudit:  # noqa: F811
    return run_here(start_audit(kg=noisy, queue=False))


def test_an_audit_is_listed_and_read_with_its_metrics_and_summary(client_as, audit):
    client = client_as("viewer")
    listed = client.get(reverse("api:kg-audit-list") + f"?kg={audit.kg_id}").json()
    assert listed["count"] == 1
    row = listed["results"][0]
    assert row["id"] == audit.pk and row["kg_name"] == "noisy" and row["status"] == "finished" and row["progress"] == 1.0
    assert "summary" not in row  # the list stays light
    assert client.get(reverse("api:kg-audit-list") + "?kg=999999").json()["count"] == 0
    assert_error(client.get(reverse("api:kg-audit-list") + "?kg=noisy"), 400, "invalid")
    detail = client.get(reverse("api:kg-audit-detail", args=[audit.pk])).json()
    assert detail["metrics"]["auc"]["all"] == audit.metrics["auc"]["all"]
    assert detail["summary"]["suspects"] == Suspect.objects.filter(audit=audit).count()
    assert sum(detail["summary"]["histogram"]["counts"]) == audit.triples
    assert {r["label"] for r in detail["relations"]} <= {"born in", "citizen of", "located in", "capital of"}
    assert_error(client.get(reverse("api:kg-audit-detail", args=[999_999])), 404, "not_found")


def test_a_curator_starts_an_audit_and_another_is_refused_while_it_runs(client_as, noisy):  # noqa: F811
    client = client_as("curator")
    response = client.post(reverse("api:kg-audit-list"), {"kg": noisy.pk}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["status"] == "queued" and body["kg"] == noisy.pk and body["triples"] == noisy.triples.count()
    assert AuditEvent.objects.filter(action="kg_audit.start").count() == 1
    refused = assert_error(client.post(reverse("api:kg-audit-list"), {"kg": noisy.pk}, format="json"), 409, "conflict")
    assert f"audit #{body['id']} of noisy is still running" in refused["message"]
    assert_error(client.post(reverse("api:kg-audit-list"), {"kg": 999_999}, format="json"), 400, "invalid")
    empty = KnowledgeGraph.objects.create(name="empty")
    assert_error(client.post(reverse("api:kg-audit-list"), {"kg": empty.pk}, format="json"), 400, "invalid")
    assert KGAudit.objects.count() == 1


def test_the_suspects_page_by_rank_and_filter_by_relation(client_as, audit):
    client = client_as("viewer")
    url = reverse("api:kg-audit-suspects", args=[audit.pk])
    first = client.get(url + "?page_size=10").json()
    assert first["count"] == Suspect.objects.filter(audit=audit).count()
    assert [s["rank"] for s in first["results"]] == list(range(1, 11))
    top = first["results"][0]
    assert set(top) == {"rank", "suspicion", "head", "relation", "tail", "reasons", "new", "task"}
    assert top["head"]["external_id"] and all({"code", "text"} == set(r) for r in top["reasons"])
    relation = top["relation"]["id"]
    only = client.get(url + f"?relation={relation}&page=1").json()
    assert only["count"] == Suspect.objects.filter(audit=audit, relation_id=relation).count()
    assert {s["relation"]["id"] for s in only["results"]} == {relation}
    assert_error(client.get(url + "?relation=citizen"), 400, "invalid")
    assert_error(client.get(url + "?relation=%C2%B2"), 400, "invalid")  # "²" is a digit to str.isdigit, not an id


def test_queueing_the_top_suspects_says_how_many_and_refuses_what_it_cannot(client_as, audit):
    client = client_as("curator")
    url = reverse("api:kg-audit-queue", args=[audit.pk])
    assert client.post(url, {"top": 3}, format="json").json() == {"queued": 3}
    assert client.post(url, {"top": 3}, format="json").json() == {"queued": 0}
    tasks = client.get(reverse("api:task-list") + f"?kg_audit={audit.pk}").json()
    assert tasks["count"] == 3 and all(t["source"].startswith(f"audit:{audit.pk} (rank ") for t in tasks["results"])
    at_least = Suspect.objects.filter(audit=audit, suspicion__gte=0.9, task__isnull=True).count()
    assert client.post(url, {"threshold": 0.9}, format="json").json() == {"queued": at_least}
    assert_error(client.post(url, {}, format="json"), 400, "invalid")
    assert_error(client.post(url, {"top": 0}, format="json"), 400, "invalid")
    assert_error(client.post(url, {"threshold": 1.5}, format="json"), 400, "invalid")
    running = start_audit(kg=audit.kg, queue=False)
    refused = assert_error(client.post(reverse("api:kg-audit-queue", args=[running.pk]), {"top": 3}, format="json"),
                           409, "conflict")
    assert "known when it has finished" in refused["message"]
    assert VerificationTask.objects.count() == 3 + at_least


def test_the_suspects_download_as_csv_once_the_audit_has_finished(client_as, audit):
    client = client_as("viewer")
    response = client.get(reverse("api:kg-audit-csv", args=[audit.pk]))
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert len(rows) == Suspect.objects.filter(audit=audit).count() and rows[0]["rank"] == "1"
    assert response["Content-Disposition"] == f'attachment; filename="kg-audit-{audit.pk}-noisy.csv"'
    running = start_audit(kg=audit.kg, queue=False)
    assert_error(client.get(reverse("api:kg-audit-csv", args=[running.pk])), 409, "conflict")
    assert_error(client.get(reverse("api:kg-audit-csv", args=[999_999])), 404, "not_found")


TOWNS_TSV = "".join(f"P{i}\tborn_in\tT{i % 4}\nT{i % 4}\tlocated_in\tC{i % 2}\n" for i in range(12))


def _upload(name: str, text: str | bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, text if isinstance(text, bytes) else text.encode(), content_type="text/tab-separated-values")


@pytest.fixture
def upload_dir(settings, tmp_path):
    settings.KGV_UPLOAD_DIR = tmp_path / "uploads"
    return settings.KGV_UPLOAD_DIR


def test_an_admin_uploads_a_kg_file_to_onboard_and_reads_its_state(client_as, upload_dir):
    client = client_as("admin")
    response = client.post(reverse("api:onboarding-list"), {"name": "towns", "file": _upload("towns.tsv", TOWNS_TSV)},
                           format="multipart")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["name"] == "towns" and body["status"] == "queued" and body["summary"] == []
    onboarding = Onboarding.objects.get(pk=body["id"])
    assert [path.name for path in upload_dir.iterdir()] == [onboarding.file.split("/")[-1]]  # kept for the workers
    read = client.get(reverse("api:onboarding-detail", args=[onboarding.pk])).json()
    assert read["stage"] == "waiting for a training worker" and read["progress"] == 0.0
    assert client.get(reverse("api:onboarding-list")).json()["count"] == 1


@pytest.mark.parametrize(("name", "file", "code", "says"), [
    ("my kg", _upload("towns.tsv", TOWNS_TSV), "invalid", "cannot name a KG"),
    ("towns", _upload("towns.pdf", TOWNS_TSV), "invalid", "is not a KG file the loader reads"),
    ("towns", _upload("towns.tsv", "P1\tborn_in\n"), "import_rejected", "1 bad row"),
    ("towns", _upload("towns.tsv", b"P1\tborn_in\tT\xff\n"), "import_rejected", "1 bad row"),
    ("towns", _upload("towns.tsv", "\n\n"), "invalid", "holds no triple"),
])
def test_an_upload_that_cannot_be_onboarded_is_refused_and_keeps_nothing(client_as, upload_dir, name, file, code, says):
    response = client_as("admin").post(reverse("api:onboarding-list"), {"name": name, "file": file}, format="multipart")
    error = assert_error(response, 400, code)
    assert says in error["message"]
    assert not Onboarding.objects.exists() and not AuditEvent.objects.exists()
    assert not upload_dir.exists() or not any(upload_dir.iterdir())


def test_a_taken_name_is_refused(client_as, noisy, upload_dir):  # noqa: F811
    error = assert_error(client_as("admin").post(reverse("api:onboarding-list"), {"name": "noisy", "file": _upload("t.tsv", TOWNS_TSV)},
                                                 format="multipart"), 400, "invalid")
    assert "a KG named 'noisy' is loaded already" in error["message"] and not Onboarding.objects.exists()
