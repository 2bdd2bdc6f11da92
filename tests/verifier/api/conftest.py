import pytest
from rest_framework.test import APIClient

from tests.verifier.exports.verified_runs import light_kg, use_fast_password_hashing, verified  # noqa: F401  (fixtures)


@pytest.fixture
def client_as(make_user):
    """``client_as("curator")`` → an API client signed in (session) as a new user with that role; None → anonymous."""

    def make(role: str | None, *, anonymous: bool = False) -> APIClient:
        client = APIClient()
        if not anonymous:
            client.force_login(make_user(role))
        return client

    return make



@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    use_fast_password_hashing(settings)
