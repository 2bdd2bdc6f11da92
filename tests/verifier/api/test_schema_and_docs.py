"""The OpenAPI schema generates cleanly and the docs page works offline (assets from drf-spectacular-sidecar)."""

import io

import pytest
import yaml
from django.core.management import call_command
from django.urls import reverse

from verifier.queue_filters import FILTER_PARAMS

pytestmark = pytest.mark.django_db


def test_the_schema_generates_and_validates_without_warnings(tmp_path):
    target = tmp_path / "schema.yaml"
    stderr = io.StringIO()
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(target), stderr=stderr)
    assert "Warning" not in stderr.getvalue() and "Error" not in stderr.getvalue(), stderr.getvalue()
    schema = yaml.safe_load(target.read_text())
    for path in ("/api/tasks/", "/api/tasks/import/", "/api/tasks/bulk/", "/api/runs/{id}/steps/", "/api/runs/{id}/reviews/",
                 "/api/runs/{id}/promote/", "/api/memory/{id}/retire/", "/api/evaluations/{id}/stop/", "/api/audit/", "/api/export/{fmt}/"):
        assert path in schema["paths"], path
    assert {"tokenAuth", "cookieAuth"} <= set(schema["components"]["securitySchemes"])
    queue_params = {p["name"] for p in schema["paths"]["/api/tasks/"]["get"]["parameters"]}
    assert queue_params == {*FILTER_PARAMS, "page", "page_size"}  # every queue filter is documented


def test_the_schema_and_docs_are_served_to_signed_in_users(client_as):
    client = client_as("viewer")
    response = client.get(reverse("api:schema") + "?format=json")
    assert response.status_code == 200 and response.json()["info"]["title"] == "KGV API"
    page = client.get(reverse("api:docs"))
    assert page.status_code == 200
    html = page.content.decode()
    assert "swagger-ui" in html and "/static/drf_spectacular_sidecar/swagger-ui-dist/" in html and "unpkg" not in html
    asset = client.get("/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js")
    assert asset.status_code == 200
