"""Repeated wrong passwords lock the username for that address; the right password then does not sign in."""

import pytest
from django.urls import reverse

from tests.users import PASSWORD

pytestmark = pytest.mark.django_db


@pytest.mark.slow
def test_after_five_wrong_passwords_even_the_right_one_is_refused(client, make_user):
    user = make_user("curator")
    url = reverse("login")
    for _ in range(4):
        response = client.post(url, {"username": user.username, "password": "wrong"})
        assert response.status_code == 200 and b"did not match" in response.content
    assert client.post(url, {"username": user.username, "password": "wrong"}).status_code == 429  # the fifth locks
    response = client.post(url, {"username": user.username, "password": PASSWORD})
    assert response.status_code == 429 and b"Sign-in locked" in response.content
    assert "_auth_user_id" not in client.session


@pytest.mark.slow
def test_a_right_password_before_the_limit_signs_in_and_resets_the_count(client, make_user):
    user = make_user("curator")
    url = reverse("login")
    for _ in range(4):
        client.post(url, {"username": user.username, "password": "wrong"})
    assert client.post(url, {"username": user.username, "password": PASSWORD}).status_code == 302
    client.logout()
    for _ in range(4):
        client.post(url, {"username": user.username, "password": "wrong"})
    assert client.post(url, {"username": user.username, "password": PASSWORD}).status_code == 302
