import pytest

from tests.verifier.exports.verified_runs import light_kg, use_fast_password_hashing, verified  # noqa: F401  (fixtures)


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    use_fast_password_hashing(settings)
