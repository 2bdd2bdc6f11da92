"""Exports over HTTP: a viewer downloads a file that parses, with a sensible filename."""

import csv
import io
import json

import pytest
from django.urls import reverse
from rdflib import Graph, URIRef
from rdflib.namespace import PROV

from tests.verifier.exports.verified_runs import make_finished_run, make_task

pytestmark = pytest.mark.django_db


def download(client, fmt, query):
    response = client.get(reverse("api:export", kwargs={"fmt": fmt}) + query, HTTP_ACCEPT="text/turtle, */*")
    assert response.status_code == 200, response.content[:300]
    return response


def test_json_csv_and_turtle_downloads_parse(verified, client_as):
    client, task, run = client_as("viewer"), verified["task"], verified["run"]
    response = download(client, "json", f"?tasks={task.pk}")
    assert response["Content-Type"] == "application/json"
    assert response["Content-Disposition"] == f'attachment; filename="kgv-task-{task.pk}-run-{run.pk}.json"'
    assert json.loads(response.content)["runs"][0]["run_id"] == run.pk

    response = download(client, "csv", f"?runs={run.pk}")
    assert response["Content-Type"].startswith("text/csv")
    assert [int(r["run_id"]) for r in csv.DictReader(io.StringIO(response.content.decode()))] == [run.pk]

    response = download(client, "ttl", f"?runs={run.pk}")
    graph = Graph().parse(data=response.content.decode(), format="turtle")
    run_iri = URIRef(f"http://testserver/api/runs/{run.pk}/")  # IRIs are the API's own URLs
    assert (URIRef(f"{run_iri}#verdict"), PROV.wasGeneratedBy, run_iri) in graph


def test_a_selection_of_tasks_names_the_file_and_reports_skipped_tasks(verified, client_as):
    second = make_task(verified["kg"], "Q42", "P19", "Q350")
    make_finished_run(second, verdict="correct")
    pending = make_task(verified["kg"], "Q90", "P17", "Q142")
    response = download(client_as("viewer"), "jsonld", f"?tasks={verified['task'].pk},{second.pk},{pending.pk}")
    assert response["Content-Type"] == "application/ld+json"
    assert response["Content-Disposition"].startswith('attachment; filename="kgv-export-2-runs-')
    assert response["X-KGV-Skipped-Tasks"] == str(pending.pk)
    assert len(Graph().parse(data=response.content.decode(), format="json-ld")) > 20


def test_reports_download_as_html_and_pdf_or_show_inline(verified, client_as):
    client, run = client_as("viewer"), verified["run"]
    html = download(client, "html", f"?runs={run.pk}&inline=1")
    assert html["Content-Disposition"].startswith("inline;") and html["Content-Type"].startswith("text/html")
    assert run.support_items.get(key="E1").content_hash in html.content.decode()
    pdf = download(client, "pdf", f"?runs={run.pk}")
    assert pdf["Content-Type"] == "application/pdf" and pdf.content.startswith(b"%PDF")
    assert pdf["Content-Disposition"].endswith('.pdf"')
