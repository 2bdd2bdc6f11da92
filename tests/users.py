"""Users with roles, for tests of who may do what."""

import pytest
from django.contrib.auth import get_user_model

from verifier.roles import set_role

PASSWORD = "kgv-test-password-1"


@pytest.fixture
def make_user(db):
    """``make_user("reviewer")`` → a saved user holding that role (``None`` → no role), password PASSWORD."""
    counter = iter(range(1, 10_000))

    def make(role: str | None, username: str | None = None):
        user = get_user_model().objects.create_user(username or f"{role or 'norole'}-{next(counter)}", password=PASSWORD)
        set_role(user, role)
        return user

    return make
