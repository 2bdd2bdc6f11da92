"""Helpers for the workbench page tests: signed-in clients by role, the sign-in redirect, uploads."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

RANK = {"anonymous": -2, None: -1, "viewer": 0, "curator": 1, "reviewer": 2, "admin": 3}


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def client_for(make_user, role) -> Client:
    """A client signed in as a new user with ``role`` (None: no role), or anonymous."""
    return Client() if role == "anonymous" else signed_in(make_user(role))


def is_login_redirect(response) -> bool:
    return response.status_code == 302 and response["Location"].startswith(reverse("login"))


def upload(name: str, text: str) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, text.encode("utf-8"), content_type="text/csv")


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    """Users are made per test; the production hasher's deliberate slowness would only cost test time.
    Autouse in every module that imports it."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
