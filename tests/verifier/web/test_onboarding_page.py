"""The onboarding page (/kgs/new/): admins only; a KG file is checked before anything is kept — a bad or taken name,
or a file the loader cannot read, is refused with the reason as messages and leaves nothing; a good one is kept for the
training workers, answered as JSON to the page's script (or a redirect without it), and the onboarding's page and state
follow it; a failed onboarding says why."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.verifier.web.workbench import client_for, fast_password_hashing, is_login_redirect, upload  # noqa: F401
from verifier import onboarding as onboarding_service
from verifier.models import AuditEvent, KnowledgeGraph, Onboarding

pytestmark = pytest.mark.django_db

TSV = "".join(f"P{i}\tborn_in\tT{i % 4}\nT{i % 4}\tlocated_in\tC{i % 2}\n" for i in range(12))
JSON = {"HTTP_ACCEPT": "application/json"}


@pytest.fixture(autouse=True)
def upload_dir(settings, tmp_path):
    settings.KGV_UPLOAD_DIR = tmp_path / "uploads"
    return settings.KGV_UPLOAD_DIR


def _kept(folder) -> list[str]:
    return sorted(path.name for path in folder.iterdir()) if folder.exists() else []


@pytest.mark.parametrize("role", ["viewer", "curator", "reviewer"])
def test_only_admins_may_onboard_a_kg(make_user, role, upload_dir):
    client = client_for(make_user, role)
    assert client.get(reverse("kg-onboard")).status_code == 403
    refused = client.post(reverse("kg-onboard"), {"name": "towns", "file": upload("towns.tsv", TSV)})
    assert refused.status_code == 403 and "needs the admin role" in refused.content.decode()
    assert not Onboarding.objects.exists() and _kept(upload_dir) == []
    assert is_login_redirect(client_for(make_user, "anonymous").get(reverse("kg-onboard")))


def test_an_admin_uploads_a_file_and_is_sent_to_its_onboarding_page(make_user, upload_dir):
    client = client_for(make_user, "admin")
    form = client.get(reverse("kg-onboard")).content.decode()
    assert 'id="onboard-form"' in form and 'enctype="multipart/form-data"' in form and 'accept=".tsv,.txt,.nt"' in form
    answer = client.post(reverse("kg-onboard"), {"name": "towns", "file": upload("towns.tsv", TSV)}, **JSON)
    onboarding = Onboarding.objects.get()
    assert answer.status_code == 201 and answer.json() == {"id": onboarding.pk, "url": f"/kgs/onboardings/{onboarding.pk}/"}
    assert _kept(upload_dir) == [onboarding.file.split("/")[-1]] and AuditEvent.objects.filter(action="kg.onboard").exists()
    page = client.get(answer.json()["url"]).content.decode()
    assert 'id="onboarding-live"' in page and "waiting for a training worker" in page
    assert '<progress id="onboarding-progress" max="100" value="0"' in page
    state = client.get(reverse("kg-onboarding-state", args=[onboarding.pk])).json()
    assert state["status"] == "queued" and state["percent"] == 0 and state["done"] is False
    assert "towns" in client.get(reverse("kg-onboard")).content.decode()  # among the latest onboardings
    # Without the page's script: a redirect to the same page.
    plain = client.post(reverse("kg-onboard"), {"name": "towns-two", "file": upload("towns.tsv", TSV)})
    assert plain.status_code == 302 and plain["Location"] == reverse("kg-onboarding", args=[Onboarding.objects.latest("pk").pk])


@pytest.mark.parametrize(("name", "file", "says"), [
    ("my kg", upload("towns.tsv", TSV), "Nothing onboarded: &#x27;my kg&#x27; cannot name a KG"),
    ("towns", upload("towns.csv", TSV), "Nothing onboarded: towns.csv is not a KG file the loader reads"),
    ("towns", upload("towns.tsv", "P1\tborn_in\tT1\nP2\tborn_in\n"), "line 2: expected 3 tab-separated non-empty fields"),
    ("towns", upload("towns.tsv", "\n"), "Nothing onboarded: towns.tsv holds no triple."),
])
def test_a_file_that_cannot_be_onboarded_is_refused_with_the_reason_and_nothing_is_kept(make_user, upload_dir, name, file, says):
    client = client_for(make_user, "admin")
    page = client.post(reverse("kg-onboard"), {"name": name, "file": file})
    assert page.status_code == 400 and says in page.content.decode()
    file.seek(0)
    answer = client.post(reverse("kg-onboard"), {"name": name, "file": file}, **JSON)
    assert answer.status_code == 400 and any(says.replace("&#x27;", "'") in line for line in answer.json()["errors"])
    assert not Onboarding.objects.exists() and not AuditEvent.objects.exists() and _kept(upload_dir) == []


def test_a_name_already_taken_is_refused(make_user, upload_dir):
    KnowledgeGraph.objects.create(name="towns", version=1)
    answer = client_for(make_user, "admin").post(reverse("kg-onboard"), {"name": "towns", "file": upload("towns.tsv", TSV)}, **JSON)
    assert answer.status_code == 400
    assert answer.json() == {"errors": ["Nothing onboarded: a KG named 'towns' is loaded already: choose another name."]}
    assert not Onboarding.objects.exists() and _kept(upload_dir) == []
    missing = client_for(make_user, "admin").post(reverse("kg-onboard"), {"name": "towns"}, **JSON)
    assert missing.status_code == 400 and missing.json()["errors"] == ["File: This field is required."]


def test_a_failed_onboarding_says_why(make_user, upload_dir):
    client = client_for(make_user, "admin")
    client.post(reverse("kg-onboard"), {"name": "towns", "file": upload("towns.tsv", TSV)}, **JSON)
    onboarding = Onboarding.objects.get()
    for kept in upload_dir.iterdir():
        kept.unlink()  # the kept upload is gone before a worker reads it
    failed = onboarding_service.run(onboarding)
    assert failed.status == Onboarding.Status.FAILED
    page = client.get(reverse("kg-onboarding", args=[onboarding.pk])).content.decode()
    assert 'id="onboarding-error"' in page and "does not exist" in page and 'id="onboarding-live"' not in page
    assert client.get(reverse("kg-onboarding-state", args=[onboarding.pk])).json()["done"] is True
