"""Large bodies are refused from their headers, before anyone reads them."""

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.authtoken.models import Token

pytestmark = pytest.mark.django_db

MB = 1024 * 1024


class UnreadableBody:
    """A request body that fails the test if anything reads it."""

    def read(self, *args):
        raise AssertionError("the body was read")

    readline = read


def _post(client: Client, path: str, length: int, **headers):
    return client.generic("POST", path, data=b"", content_type="multipart/form-data; boundary=x",
                          CONTENT_LENGTH=str(length), **{"wsgi.input": UnreadableBody(), **headers})


def test_an_anonymous_upload_is_refused_unread():
    response = _post(Client(), reverse("api:task-import"), 100 * MB // 10)
    assert response.status_code == 401 and response.json()["error"]["code"] == "not_authenticated"


def test_a_body_over_the_limit_is_refused_unread_even_when_signed_in(make_user):
    client = Client()
    client.force_login(make_user("curator"))
    response = _post(client, reverse("api:task-import"), 100 * MB)
    assert response.status_code == 413 and "larger than 20 MB" in response.json()["error"]["message"]
    page = _post(client, reverse("queue-import"), 100 * MB)
    assert page.status_code == 413


def test_a_valid_token_may_send_an_upload_a_wrong_one_may_not(make_user):
    token = Token.objects.create(user=make_user("curator"))
    wrong = _post(Client(), reverse("api:task-import"), 5 * MB, HTTP_AUTHORIZATION="Token nope")
    assert wrong.status_code == 401
    let_through = _post(Client(), reverse("api:task-import"), 5 * MB, HTTP_AUTHORIZATION=f"Token {token.key}")
    assert let_through.status_code not in (401, 413), let_through.content  # the gate let it through to the view
