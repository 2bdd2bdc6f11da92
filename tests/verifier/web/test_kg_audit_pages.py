"""The KG audit pages on a small generated KG with errors planted in it, audited for real (no workers: the audit runs in
the test's process): who may open and act on what, the live state of a running audit, what a finished one shows and
explains, a suspect's page, queueing suspects into the filtered queue, the downloads, and a re-audit's comparison."""

from __future__ import annotations

import csv
import io
import re

import pytest
from django.urls import reverse

from tests.verifier.kg_audit.test_audit import PLANTED, _rows, noisy  # noqa: F401  (fixture)
from tests.verifier.web.workbench import client_for, fast_password_hashing, is_login_redirect, signed_in  # noqa: F401
from verifier.kg.amend import amend
from verifier.kg_audit.pipeline import prepare, run_here, score_chunk, start_audit
from verifier.models import AuditEvent, KGAudit, Suspect, VerificationTask
from verifier.roles import ROLES

pytestmark = pytest.mark.django_db


@pytest.fixture
def audit(noisy) -> KGAudit:  # noqa: F811
    return run_here(start_audit(kg=noisy, queue=False))


def _state() -> tuple:
    return (AuditEvent.objects.count(), KGAudit.objects.count(), VerificationTask.objects.count())


def test_each_kg_audit_page_admits_exactly_the_roles_it_needs(make_user, audit):
    reads = [reverse("kg-audit-list"), reverse("kg-audit-detail", args=[audit.pk]), reverse("kg-audit-state", args=[audit.pk]),
             reverse("kg-audit-suspect", args=[audit.pk, 1]), reverse("kg-audit-csv", args=[audit.pk]),
             reverse("kg-audit-report", args=[audit.pk])]
    writes = [(reverse("kg-audit-list"), {"kg": audit.kg_id}), (reverse("kg-audit-queue", args=[audit.pk]), {"top": 2})]
    for url in reads:
        assert is_login_redirect(client_for(make_user, "anonymous").get(url)), url
        assert client_for(make_user, None).get(url).status_code == 403, url
        assert client_for(make_user, "viewer").get(url).status_code == 200, url
    for url, data in writes:
        before = _state()
        assert is_login_redirect(client_for(make_user, "anonymous").post(url, data)), url
        refused = client_for(make_user, "viewer").post(url, data)
        assert refused.status_code == 403 and "needs the curator role." in refused.content.decode(), url
        assert _state() == before
        done = client_for(make_user, "curator").post(url, data)
        assert done.status_code == 302 and AuditEvent.objects.count() > before[0], url


def test_the_list_shows_each_kgs_audits_and_offers_the_run_form_to_curators_only(make_user, audit):
    viewer_page = client_for(make_user, "viewer").get(reverse("kg-audit-list")).content.decode()
    assert f'<tr data-audit-id="{audit.pk}">' in viewer_page and "noisy" in viewer_page
    assert 'id="run-audit-form"' not in viewer_page and 'id="onboard-link"' not in viewer_page
    assert f'{audit.metrics["auc"]["all"]:.3f}' in viewer_page
    curator_page = client_for(make_user, "curator").get(reverse("kg-audit-list") + f"?kg={audit.kg_id}").content.decode()
    assert 'id="run-audit-form"' in curator_page
    assert re.search(rf'<option value="{audit.kg_id}" selected>', curator_page)
    assert 'id="onboard-link"' in client_for(make_user, "admin").get(reverse("kg-audit-list")).content.decode()
    nav = curator_page.split('<nav class="primary"')[1].split("</nav>")[0]
    assert '<a href="/kg-audits/" aria-current="page">KG audits</a>' in nav


def test_a_curator_starts_an_audit_and_a_second_one_waits_for_it(make_user, noisy):  # noqa: F811
    client = client_for(make_user, "curator")
    response = client.post(reverse("kg-audit-list"), {"kg": noisy.pk})
    audit = KGAudit.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("kg-audit-detail", args=[audit.pk])
    assert audit.status == KGAudit.Status.QUEUED and audit.created_by is not None
    again = client.post(reverse("kg-audit-list"), {"kg": noisy.pk}, follow=True)
    assert f"No audit started: audit #{audit.pk} of noisy is still running" in again.content.decode()
    assert KGAudit.objects.count() == 1
    unknown = client.post(reverse("kg-audit-list"), {"kg": 999_999})
    assert unknown.status_code == 400 and KGAudit.objects.count() == 1


def test_a_running_audit_shows_its_stage_and_progress_and_its_state_says_the_same(make_user, noisy):  # noqa: F811
    audit = start_audit(kg=noisy, queue=False, chunk_size=100)
    prepare(audit.pk, send_chunks=False)
    score_chunk(audit.pk, 0)
    audit.refresh_from_db()
    client = client_for(make_user, "viewer")
    page = client.get(reverse("kg-audit-detail", args=[audit.pk])).content.decode()
    assert 'id="kg-audit-live"' in page and f'data-state-url="{reverse("kg-audit-state", args=[audit.pk])}"' in page
    assert f'<span id="kg-audit-scored">100</span> of <span id="kg-audit-triples">{audit.triples}</span>' in page
    percent = int(100 * 100 / audit.triples)
    assert f'<progress id="kg-audit-progress" max="100" value="{percent}"' in page
    assert audit.stage in page and 'id="kg-audit-suspects"' not in page  # nothing found yet
    state = client.get(reverse("kg-audit-state", args=[audit.pk])).json()
    assert state == {"id": audit.pk, "status": "running", "status_label": "Running", "stage": audit.stage, "triples": audit.triples,
                     "scored": 100, "progress": round(100 / audit.triples, 4), "percent": percent, "stale": False, "done": False,
                     "error": ""}
    assert client.get(reverse("kg-audit-csv", args=[audit.pk])).status_code == 409  # nothing to download yet
    run_here(audit)
    assert client.get(reverse("kg-audit-state", args=[audit.pk])).json()["done"] is True


def test_a_finished_audit_explains_itself_and_lists_its_suspects_with_their_reasons(make_user, audit):
    client = client_for(make_user, "viewer")
    page = client.get(reverse("kg-audit-detail", args=[audit.pk])).content.decode()
    assert "how likely it is wrong" in page and "look here first" in page and "taking the odds of right and wrong as even" in page
    assert f"ROC AUC of\n    <strong>{audit.metrics['auc']['all']:.3f}</strong>" in page
    assert page.count('<rect class="histogram-bar') == 20 and ' style="' not in page.split('id="kg-audit-distribution"')[1]
    assert "This is the KG's first finished audit" in page
    assert "comparing the names of each triple's ends" in page  # the generated KG names its entities
    per_relation = page.split('id="kg-audit-relations"')[1].split("</section>")[0]
    assert all(f'<tr data-relation="{row["relation"]}">' in per_relation for row in audit.summary["per_relation"])
    rows = re.findall(r'<tr data-rank="(\d+)"', page)
    assert [int(rank) for rank in rows] == list(range(1, 51))  # 50 a page, by rank
    planted = Suspect.objects.get(audit=audit, head__external_id="P5", tail__external_id="T3")
    assert planted.rank <= 10 and planted.reasons  # a planted error ranks first (tests/verifier/kg_audit/test_audit.py)
    row = page.split(f'<tr data-rank="{planted.rank}"')[1].split("</tr>")[0]
    assert all(f'<li data-code="{reason["code"]}">' in row for reason in planted.reasons) and "range" in row
    assert "?page=2" in page
    second = client.get(reverse("kg-audit-detail", args=[audit.pk]) + "?page=2").content.decode()
    assert re.findall(r'<tr data-rank="(\d+)"', second)[0] == "51"

    citizen = planted.relation_id
    only = client.get(reverse("kg-audit-detail", args=[audit.pk]) + f"?relation={citizen}").content.decode()
    ranks = [int(rank) for rank in re.findall(r'<tr data-rank="(\d+)"', only)]
    expected = list(Suspect.objects.filter(audit=audit, relation_id=citizen).order_by("rank").values_list("rank", flat=True)[:50])
    assert ranks == expected and ranks
    bad = client.get(reverse("kg-audit-detail", args=[audit.pk]) + "?relation=citizen")
    assert bad.status_code == 400 and "relation: &#x27;citizen&#x27; is not a relation id" in bad.content.decode()
    assert client.get(reverse("kg-audit-detail", args=[audit.pk]) + "?relation=%C2%B2").status_code == 400
    assert client.get(reverse("kg-audit-list") + "?kg=%C2%B2").status_code == 200  # an unusable KG: every KG's audits


def test_the_suspect_page_shows_reasons_details_the_ends_and_its_task_once_queued(make_user, audit):
    suspect = Suspect.objects.select_related("head", "tail").get(audit=audit, head__external_id="P5", tail__external_id="T3")
    client = client_for(make_user, "viewer")
    page = client.get(reverse("kg-audit-suspect", args=[audit.pk, suspect.rank])).content.decode()
    assert all(f'<li data-code="{reason["code"]}">' in page for reason in suspect.reasons)
    assert "What the rules, the structural model and the reference KGs say" in page
    assert "No structural model of this KG is ready to score it." in page  # audited on statistics alone
    assert f'href="/entities/?kg={audit.kg_id}&amp;q=P5"' in page and f'href="/entities/?kg={audit.kg_id}&amp;q=T3"' in page
    assert "Not queued yet" in page
    suspect.refresh_from_db()
    assert suspect.details  # read once and kept
    client_for(make_user, "curator").post(reverse("kg-audit-queue", args=[audit.pk]), {"top": suspect.rank})
    suspect.refresh_from_db()
    queued = client.get(reverse("kg-audit-suspect", args=[audit.pk, suspect.rank])).content.decode()
    assert f'href="{reverse("task-detail", args=[suspect.task_id])}" id="suspect-task-link"' in queued and "no run yet" in queued
    assert client.get(reverse("kg-audit-suspect", args=[audit.pk, 100_000])).status_code == 404


def test_queueing_suspects_lands_on_the_queue_filtered_to_the_audit(make_user, audit):
    client = client_for(make_user, "curator")
    response = client.post(reverse("kg-audit-queue", args=[audit.pk]), {"top": 5})
    assert response.status_code == 302 and response["Location"] == f"/?kg_audit={audit.pk}"
    queue = client.get(response["Location"]).content.decode()
    queued = sorted(int(pk) for pk in re.findall(r'<tr data-task-id="(\d+)"', queue))
    assert queued == sorted(Suspect.objects.filter(audit=audit, rank__lte=5).values_list("task_id", flat=True))
    assert "5 suspect(s) of KG audit" in queue and 'name="kg_audit" value="' in queue
    assert VerificationTask.objects.filter(source__startswith=f"audit:{audit.pk} (rank ").count() == 5

    again = client.post(reverse("kg-audit-queue", args=[audit.pk]), {"top": 5}, follow=True).content.decode()
    assert "No suspect queued" in again and VerificationTask.objects.count() == 5
    by_suspicion = client.post(reverse("kg-audit-queue", args=[audit.pk]), {"threshold": 0.5}, follow=True)
    expected = Suspect.objects.filter(audit=audit, suspicion__gte=0.5).count()
    assert VerificationTask.objects.count() == max(5, expected) and by_suspicion.status_code == 200
    nothing = client.post(reverse("kg-audit-queue", args=[audit.pk]), {}, follow=True).content.decode()
    assert "Nothing queued: Say how many of the top suspects to queue" in nothing
    wrong = client.post(reverse("kg-audit-queue", args=[audit.pk]), {"threshold": 2}, follow=True).content.decode()
    assert "Nothing queued: Ensure this value is less than or equal to 1.0." in wrong
    assert VerificationTask.objects.count() == max(5, expected)
    other = start_audit(kg=audit.kg, queue=False)
    refused = client.post(reverse("kg-audit-queue", args=[other.pk]), {"top": 5}, follow=True).content.decode()
    assert f"Nothing queued: audit #{other.pk} is queued" in refused
    assert client.get("/?kg_audit=x").status_code == 400


def test_the_suspects_download_as_csv_and_the_report_as_an_html_attachment(make_user, audit):
    client = client_for(make_user, "viewer")
    response = client.get(reverse("kg-audit-csv", args=[audit.pk]))
    assert response["Content-Disposition"] == f'attachment; filename="kg-audit-{audit.pk}-noisy.csv"'
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert len(rows) == audit.suspects.count() and rows[0]["rank"] == "1"
    report = client.get(reverse("kg-audit-report", args=[audit.pk]))
    assert report["Content-Type"].startswith("text/html")
    assert report["Content-Disposition"] == f'attachment; filename="kg-audit-{audit.pk}-noisy.html"'
    assert "Suspects per relation" in report.content.decode()


def test_a_reaudit_says_what_moved_and_marks_new_suspects(make_user, audit):
    kg = audit.kg
    amend(kg, remove=[_rows(kg, PLANTED[0])], add=[])
    kg.refresh_from_db()
    second = run_here(start_audit(kg=kg, queue=False))
    moved = second.summary["compared"]
    page = client_for(make_user, "viewer").get(reverse("kg-audit-detail", args=[second.pk])).content.decode()
    assert f'<strong id="compared-gone">{moved["gone"]}</strong>' in page
    assert f'<strong id="compared-new">{moved["new"]}</strong>' in page and f'<strong id="compared-kept">{moved["kept"]}</strong>' in page
    new_ranks = set(Suspect.objects.filter(audit=second, new=True, rank__lte=50).values_list("rank", flat=True))
    assert {int(rank) for rank in re.findall(r'<tr data-rank="(\d+)" data-new="true"', page)} == new_ranks


def test_a_failed_audit_says_why(make_user, noisy):  # noqa: F811
    audit = start_audit(kg=noisy, queue=False)
    amend(noisy, remove=[_rows(noisy, PLANTED[0])], add=[])  # the KG changes under the audit
    audit = prepare(audit.pk, send_chunks=False)
    assert audit.status == KGAudit.Status.FAILED
    page = client_for(make_user, "viewer").get(reverse("kg-audit-detail", args=[audit.pk])).content.decode()
    assert 'id="kg-audit-error"' in page and "changed while it was audited" in page
    assert 'id="kg-audit-live"' not in page


@pytest.mark.parametrize("role", ROLES)
def test_the_navigation_leads_every_role_to_the_kg_audits(make_user, role):
    page = signed_in(make_user(role)).get(reverse("queue")).content.decode()
    assert '<a href="/kg-audits/">KG audits</a>' in page
