"""Request rates are limited per client: anonymous callers by address, signed-in users by account."""

import pytest
from django.core.cache import cache
from django.urls import reverse
from rest_framework.throttling import AnonRateThrottle, UserRateThrottle

from tests.verifier.api.error_shape import assert_error

pytestmark = pytest.mark.django_db


@pytest.fixture
def tight_rates(monkeypatch):
    monkeypatch.setitem(AnonRateThrottle.THROTTLE_RATES, "anon", "3/min")  # one dict for every rate class
    monkeypatch.setitem(UserRateThrottle.THROTTLE_RATES, "user", "3/min")
    for scope in ("anon", "user"):
        cache.delete_many([f"throttle_{scope}_{ident}" for ident in ("127.0.0.1", *range(1, 200))])


def test_an_anonymous_caller_over_the_rate_gets_429_with_retry_after(client, tight_rates):
    url = reverse("api:task-list")
    statuses = [client.get(url, REMOTE_ADDR="203.0.113.9").status_code for _ in range(4)]
    assert statuses == [401, 401, 401, 429]
    response = client.get(url, REMOTE_ADDR="203.0.113.9")
    assert_error(response, 429, "throttled")
    assert int(response["Retry-After"]) > 0
    assert client.get(url, REMOTE_ADDR="203.0.113.10").status_code == 401  # another address is not held back


def test_a_signed_in_user_over_the_rate_gets_429(client_as, tight_rates):
    client = client_as("viewer")
    url = reverse("api:task-list")
    assert [client.get(url).status_code for _ in range(4)] == [200, 200, 200, 429]


def test_guessing_tokens_is_counted_like_any_anonymous_call(client, tight_rates):
    url = reverse("api:task-list")
    headers = {"HTTP_AUTHORIZATION": "Token wrong", "REMOTE_ADDR": "203.0.113.11"}
    assert [client.get(url, **headers).status_code for _ in range(4)] == [401, 401, 401, 429]
