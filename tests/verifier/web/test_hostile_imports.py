"""Hostile files and parameters on every import and search path: a clear 400 naming the problem, never a 500,
nothing stored."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from tests.verifier.web.run_pages import make_world
from tests.verifier.web.workbench import client_for, fast_password_hashing  # noqa: F401  (autouse fixture)
from verifier.models import VerificationTask

pytestmark = pytest.mark.django_db

HOSTILE = [
    ("latin1.csv", "Douglas Adams,country of citizenship,Fran\xe7e\n".encode("latin-1"), "line 1 is not UTF-8 (byte 0xe7)"),
    ("binary.csv", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "line 1 is not UTF-8 (byte 0x89)"),
    ("renamed.csv", b"PK\x03\x04\x14\x00\x06\x00", "line 1 holds a NUL byte"),
    ("nul.csv", b"Q42,P19\x00,Q350\n", "line 1 holds a NUL byte"),
    ("huge.csv", b"Q42,P19," + b"x" * 200_000 + b"\n", "cannot read this line"),
    ("long.csv", b"Q42,P19," + b"x" * 5_000 + b"\n", "longer than 1000 characters"),
]


@pytest.mark.parametrize("name, body, message", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_the_web_import_names_the_problem_of_a_hostile_file(make_user, name, body, message):
    world = make_world()
    response = client_for(make_user, "curator").post(
        reverse("queue-import"), {"kg": world.kg.pk, "file": SimpleUploadedFile(name, body, content_type="text/csv")})
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not VerificationTask.objects.exists()


@pytest.mark.parametrize("name, body, message", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_the_api_import_names_the_problem_of_a_hostile_file(make_user, name, body, message):
    world = make_world()
    client = client_for(make_user, "curator")
    response = client.post(reverse("api:task-import"), {"kg": world.kg.pk, "file": SimpleUploadedFile(name, body)})
    assert response.status_code == 400, response.content
    assert message in response.content.decode()
    assert not VerificationTask.objects.exists()


def test_a_spreadsheets_byte_order_mark_is_not_part_of_the_first_column(make_user):
    world = make_world()
    body = "\ufeffhead,relation,tail\nDouglas Adams,country of citizenship,France\n".encode()
    response = client_for(make_user, "curator").post(
        reverse("queue-import"), {"kg": world.kg.pk, "file": SimpleUploadedFile("excel.csv", body, content_type="text/csv")})
    assert response.status_code == 302
    assert VerificationTask.objects.get(kg=world.kg).head.label == "Douglas Adams"


@pytest.mark.parametrize("url", ["queue", "memory-list", "api:task-list", "api:memory-list", "api:run-list"])
def test_a_nul_in_a_search_is_a_400_not_a_500(make_user, url):
    response = client_for(make_user, "admin").get(reverse(url) + "?q=a%00b")
    assert response.status_code == 400 and "NUL" in response.content.decode()


def test_a_nul_in_a_json_body_is_a_400_not_a_500(make_user):
    world = make_world()
    task = VerificationTask.objects.create(kg=world.kg, head=world.kg.entities.first(), relation=world.kg.relations.first(),
                                           tail=world.kg.entities.last())
    response = client_for(make_user, "curator").post(reverse("api:run-list"), {"task": task.pk, "config": {"mode": "a\u0000"}},
                                                     content_type="application/json")
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid"
