"""Property-based fuzzing of the REST API from the OpenAPI schema it serves (schemathesis): every operation,
with each role's token, gets generated requests — valid and invalid bodies, parameters and ids. The API
never answers with a 5xx nor logs a traceback, and a refused write stores nothing half-done (each example runs
in the test's transaction; the counts are checked after).

A second run sends the same operations hostile values: every query parameter in unicode digits ("²", "١٢"), past
bigint or as "1e999", and each JSON body with a field nested 5,000 deep, a 5,000-digit integer or 1e999 in place
of its numbers — all refused with a 4xx."""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from werkzeug.test import Client as WSGIClient

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

SENT = tally("API fuzzing", "requests_sent", "refused_with_a_4xx", "5xx", "tracebacks")


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
def test_no_generated_request_gets_a_server_error(case, token, verified, tracebacks):  # noqa: F811
    runs_before, mark = Run.objects.count(), len(tracebacks.records)
    response = case.call(headers={"Authorization": f"Token {token}"})
    _count(response.status_code, tracebacks.since(mark), (case.method, case.formatted_path, case.body, response.text[:500]))
    if response.status_code >= 400:
        assert Run.objects.count() == runs_before  # a refused request started nothing


def _count(status: int, logged: list[str], what) -> None:
    SENT["requests_sent"] += 1
    SENT["refused_with_a_4xx"] += 400 <= status < 500
    SENT["5xx"] += status >= 500
    SENT["tracebacks"] += len(logged)
    assert status < 500 and not logged, (status, logged, what)


# ---- hostile values -------------------------------------------------------------------------------------------

hostile = schemathesis.openapi.from_dict(_spec())
hostile.app = schema.app
HOSTILE_QUERY = st.sampled_from(["²", "١٢", "𝟙", "⁵,٣", "99999999999999999999999", "1e999", "-1"])
ATTACKS = {  # what replaces a JSON body's numbers (or, for "deep", its first field's value)
    "deep": "[" * 5_000 + "]" * 5_000, "5,000 digits": "7" * 5_000, "1e999": "1e999"}
CHOSEN: dict[str, str] = {}  # case id → the attack drawn for its body


@hostile.hook
def flatmap_case(context, case):
    """Every query parameter the operation declares, in hostile digits; a body attack drawn for the case."""
    names = [parameter.name for parameter in case.operation.query]

    def hostile_case(query: dict, attack: str):
        case.query = {**case.query, **query}
        CHOSEN[case.id] = attack
        return case

    return st.builds(hostile_case, st.fixed_dictionaries(dict.fromkeys(names, HOSTILE_QUERY)), st.sampled_from(sorted(ATTACKS)))


def _attacked(body, attack: str) -> str:
    """The body as JSON text with the attack in place of its numbers (or of its first field's value)."""
    marker = "__kgv_hostile__"
    if isinstance(body, dict) and body:
        keys = [key for key, value in body.items() if isinstance(value, int | float) and not isinstance(value, bool)]
        keys = keys if attack != "deep" and keys else [next(iter(body))]
        text = json.dumps({**body, **dict.fromkeys(keys, marker)})
    else:
        text = json.dumps(marker)
    return text.replace(json.dumps(marker), ATTACKS[attack])


@pytest.fixture
def hostile_token(make_user, verified):  # noqa: F811
    """An admin's: every operation reads what it is sent (the first run shows the other roles refused earlier)."""
    from rest_framework.authtoken.models import Token

    return Token.objects.create(user=make_user("admin")).key


@hostile.parametrize()
@settings(max_examples=4, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck),
          phases=[Phase.generate])  # generated cases only: the hook makes them hostile, explicit examples skip it
def test_hostile_digits_deep_nesting_and_huge_numbers_are_refused_with_a_4xx(case, hostile_token, verified,  # noqa: F811
                                                                           tracebacks):
    mark, runs_before = len(tracebacks.records), Run.objects.count()
    if case.media_type == "application/json" and case.body is not None and case.method in ("POST", "PATCH", "PUT"):
        response = WSGIClient(schema.app).open(  # the raw text: no JSON library writes these numbers or this depth
            case.formatted_path, method=case.method, query_string=urlencode(case.query, doseq=True),
            data=_attacked(case.body, CHOSEN.get(case.id, "deep")), content_type="application/json",
            headers={"Authorization": f"Token {hostile_token}"})
        status, text, hostile_body = response.status_code, response.get_data(as_text=True), True
    else:
        answer = case.call(headers={"Authorization": f"Token {hostile_token}"})
        status, text, hostile_body = answer.status_code, answer.text, False
    _count(status, tracebacks.since(mark), (case.method, case.formatted_path, case.query, text[:500]))
    if hostile_body:  # (a hostile query value may be a legitimate search: "²" finds nothing)
        assert 400 <= status < 500, (case.method, case.formatted_path, status, text[:500])
    assert Run.objects.count() == runs_before

