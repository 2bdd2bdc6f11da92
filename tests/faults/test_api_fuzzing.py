"""Property-based fuzzing of the REST API from the OpenAPI schema it serves (schemathesis): every operation,
with each role's token, gets generated requests — valid and invalid bodies, parameters and ids. The API
never answers with a 5xx, and a refused write stores nothing half-done (each example runs in the test's
transaction; the counts are checked after)."""

from __future__ import annotations

import json

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck, settings

from tests.faults.tally import tally
from tests.verifier.exports.verified_runs import light_kg, verified  # noqa: F401  (fixtures)
from verifier.models import Run

pytestmark = pytest.mark.django_db

EXAMPLES_PER_OPERATION = 4  # × 4 roles × 21 operations: a few hundred requests, about two minutes on two cores


def _spec() -> dict:
    from drf_spectacular.generators import SchemaGenerator
    from drf_spectacular.renderers import OpenApiJsonRenderer

    return json.loads(OpenApiJsonRenderer().render(SchemaGenerator().get_schema(request=None, public=True)))


schema = schemathesis.openapi.from_dict(_spec())
schema.app = get_wsgi_application()

SENT = tally("API fuzzing", "requests_sent", "answered_with_a_5xx")


@pytest.fixture(autouse=True)
def keep_the_test_connection():
    """As Django's test client does: the WSGI handler must not close the connection holding the test's transaction."""
    from django.core import signals
    from django.db import close_old_connections

    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@pytest.fixture(params=["viewer", "curator", "reviewer", "admin"])
def token(request, make_user, verified):  # noqa: F811
    from rest_framework.authtoken.models import Token

    return Token.objects.create(user=make_user(request.param)).key


@schema.parametrize()
@settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
def test_no_generated_request_gets_a_server_error(case, token, verified):  # noqa: F811
    runs_before = Run.objects.count()
    response = case.call(headers={"Authorization": f"Token {token}"})
    SENT["requests_sent"] += 1
    if response.status_code >= 500:
        SENT["answered_with_a_5xx"] += 1
    assert response.status_code < 500, (case.method, case.formatted_path, case.body, response.text[:500])
    if response.status_code >= 400:
        assert Run.objects.count() == runs_before  # a refused request started nothing

