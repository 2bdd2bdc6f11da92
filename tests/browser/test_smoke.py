import pytest

from tests.browser.conftest import sign_in
from tests.users import PASSWORD

pytestmark = pytest.mark.django_db(transaction=True)


def test_sign_in_lands_on_the_workbench(browser_context, make_user):
    make_user("viewer", username="vera")
    page = sign_in(browser_context, "vera", PASSWORD)
    assert "vera" in page.content()
