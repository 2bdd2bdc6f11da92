"""``manage.py create_user``: users with roles and API tokens for scripts."""

import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.urls import reverse
from rest_framework.test import APIClient

from verifier.models import AuditEvent
from verifier.roles import role_of

pytestmark = pytest.mark.django_db


def run_command(*args) -> str:
    out = io.StringIO()
    call_command("create_user", *args, stdout=out)
    return out.getvalue()


def test_creates_a_user_with_a_role_and_a_generated_password():
    output = run_command("ada", "--role", "reviewer")
    user = get_user_model().objects.get(username="ada")
    assert role_of(user) == "reviewer"
    password = output.split("with password ")[1].split()[0]
    assert user.check_password(password)
    assert AuditEvent.objects.filter(action="user.role", after={"role": "reviewer"}).exists()


def test_token_prints_a_key_that_authenticates_api_calls():
    run_command("bot", "--role", "viewer", "--password", "a-long-enough-password")
    key = run_command("bot", "--token").strip()
    assert run_command("bot", "--token").strip() == key  # the same token every time
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.get(reverse("api:task-list")).status_code == 200


def test_changes_the_role_of_an_existing_user_and_refuses_unknown_users():
    run_command("cy", "--role", "viewer")
    run_command("cy", "--role", "curator")
    assert role_of(get_user_model().objects.get(username="cy")) == "curator"
    with pytest.raises(CommandError, match="no user 'ghost'"):
        run_command("ghost", "--token")
