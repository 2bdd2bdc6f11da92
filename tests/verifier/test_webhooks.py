"""Webhooks: signed POSTs to a real local receiver on run finished, review recorded and memory promoted; retries
with back-off and a delivery log; the admin API with its test delivery; and, end to end, a run finished by the
session's real Celery worker reaching the receiver with nobody polling. The receivers listen on loopback, which an
operator has to allow (KGV_WEBHOOK_ALLOWED_NETWORKS): these tests allow it, except those of the refusals."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import socket
import time
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from tests.http_fixtures import LocalHTTPServer, Reply, refused_url
from tests.verifier.web.run_pages import make_finished_run, make_live_run, make_world
from verifier import services, webhooks
from verifier.models import AuditEvent, Webhook, WebhookDelivery


def signature_is_valid(request, secret: str) -> bool:
    """What a receiver does (verifier/webhooks.py's docstring)."""
    fields = dict(part.split("=", 1) for part in request.header("KGV-Signature").split(","))
    expected = hmac.new(secret.encode(), f"{fields['t']}.".encode() + request.body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, fields["v1"]) and abs(time.time() - int(fields["t"])) < 300


@pytest.fixture(autouse=True)
def loopback_allowed(settings):
    settings.KGV_WEBHOOK_ALLOWED_NETWORKS = [ipaddress.ip_network("127.0.0.0/8")]
    return settings


@pytest.fixture
def receiver():
    with LocalHTTPServer() as server:
        server.route("/hook", Reply({"ok": True}))
        yield server


def emitted(django_capture_on_commit_callbacks, action):
    """Run ``action`` as a request would (its transaction commits) without the Celery message: the first attempt
    is made here, by hand, as the worker would."""
    before = set(WebhookDelivery.objects.values_list("pk", flat=True))
    with django_capture_on_commit_callbacks(execute=False):
        action()
    new = WebhookDelivery.objects.exclude(pk__in=before).order_by("pk")
    return [webhooks.deliver(delivery.pk) for delivery in new]


@pytest.mark.django_db
def test_a_review_reaches_the_subscribed_webhooks_signed_and_only_those(receiver, make_user, django_capture_on_commit_callbacks):
    run = make_finished_run(make_world())
    every = Webhook.objects.create(url=receiver.url + "/hook")
    reviews_only = Webhook.objects.create(url=receiver.url + "/hook", events=["review.recorded"])
    Webhook.objects.create(url=receiver.url + "/hook", events=["memory.promoted"])
    Webhook.objects.create(url=receiver.url + "/hook", active=False)
    reviewer = make_user("reviewer")

    sent = emitted(django_capture_on_commit_callbacks, lambda: services.review_run(
        run=run, reviewer=reviewer, decision="override", reason="the KG is wrong", verdict="incorrect"))

    assert sorted(d.webhook_id for d in sent) == [every.pk, reviews_only.pk]
    assert all(d.status == WebhookDelivery.Status.DELIVERED and d.attempts == 1 and d.response_status == 200 for d in sent)
    assert len(receiver.requests) == 2
    request = receiver.requests[0]
    assert request.method == "POST" and request.header("KGV-Event") == "review.recorded"
    assert signature_is_valid(request, Webhook.objects.get(pk=int(sent[0].webhook_id)).secret)
    assert not signature_is_valid(request, "another secret")
    event = request.json()
    assert event["event"] == "review.recorded"
    assert event["data"]["verdict"] == "incorrect" and event["data"]["agent_verdict"] == "correct"
    assert event["data"]["triple"]["head"] == {"id": "Q42", "label": "Douglas Adams"}
    assert request.header("KGV-Delivery") in {str(d.pk) for d in sent}


@pytest.mark.django_db
def test_promotion_and_a_cancelled_run_are_announced_once_each(receiver, make_user, django_capture_on_commit_callbacks):
    world = make_world()
    run = make_finished_run(world)
    Webhook.objects.create(url=receiver.url + "/hook")
    reviewer = make_user("reviewer")
    services.review_run(run=run, reviewer=reviewer, decision="accept")
    WebhookDelivery.objects.all().delete()

    promoted = emitted(django_capture_on_commit_callbacks, lambda: services.promote_run(run=run, actor=reviewer))
    again = emitted(django_capture_on_commit_callbacks, lambda: services.promote_run(run=run, actor=reviewer))
    assert [d.event for d in promoted] == ["memory.promoted"] and again == []  # the second click promotes nothing new

    live = make_live_run(world)
    cancelled = emitted(django_capture_on_commit_callbacks, lambda: services.cancel_run(run=live, actor=reviewer))
    assert [d.event for d in cancelled] == ["run.finished"]
    data = receiver.requests[-1].json()["data"]
    assert data["run"] == live.pk and data["status"] == "cancelled" and data["url"] == f"/api/runs/{live.pk}/"


@pytest.mark.django_db
def test_a_failing_receiver_is_retried_with_back_off_then_given_up(receiver, make_user, django_capture_on_commit_callbacks):
    run = make_finished_run(make_world())
    Webhook.objects.create(url=receiver.url + "/hook")
    receiver.fail_next(500, body="down for maintenance")
    [delivery] = emitted(django_capture_on_commit_callbacks, lambda: services.review_run(
        run=run, reviewer=make_user("reviewer"), decision="accept"))

    assert delivery.status == WebhookDelivery.Status.PENDING and delivery.attempts == 1
    assert delivery.response_status == 500 and delivery.response_excerpt == "down for maintenance"
    assert delivery.error == "the receiver answered 500"
    wait = (delivery.next_attempt_at - timezone.now()).total_seconds()
    assert webhooks.BACKOFF_SECONDS[0] - 5 < wait <= webhooks.BACKOFF_SECONDS[0]
    assert webhooks.deliver_due() == 0 and len(receiver.requests) == 1  # not due yet

    receiver.fail_next(503, headers={"Retry-After": "7"})  # the receiver's own wait is honoured
    WebhookDelivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now() - timedelta(seconds=1))
    assert webhooks.deliver_due() == 1
    delivery.refresh_from_db()
    assert delivery.attempts == 2 and 0 < (delivery.next_attempt_at - timezone.now()).total_seconds() <= 7

    receiver.fail_next(500, times=len(webhooks.BACKOFF_SECONDS))
    for _ in range(len(webhooks.BACKOFF_SECONDS) - 1):
        WebhookDelivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now() - timedelta(seconds=1))
        webhooks.deliver_due()
    delivery.refresh_from_db()
    assert delivery.status == WebhookDelivery.Status.FAILED and delivery.attempts == len(webhooks.BACKOFF_SECONDS) + 1
    assert delivery.next_attempt_at is None and webhooks.deliver_due() == 0


@pytest.mark.django_db
def test_an_unreachable_receiver_is_logged_with_the_connection_error(make_user, django_capture_on_commit_callbacks):
    run = make_finished_run(make_world())
    Webhook.objects.create(url=refused_url() + "/hook")
    [delivery] = emitted(django_capture_on_commit_callbacks, lambda: services.review_run(
        run=run, reviewer=make_user("reviewer"), decision="accept"))
    assert delivery.status == WebhookDelivery.Status.PENDING and delivery.response_status is None
    assert "ConnectionError" in delivery.error


# ---- the admin API ---------------------------------------------------------------------------------

@pytest.fixture
def admin_api(make_user):
    client = APIClient()
    client.force_login(make_user("admin"))
    return client


@pytest.mark.django_db
def test_an_admin_registers_tests_and_reads_the_log_of_a_webhook(admin_api, receiver):
    created = admin_api.post("/api/webhooks/", {"url": receiver.url + "/hook", "events": ["run.finished"],
                                                "description": "curation pipeline"}, format="json")
    assert created.status_code == 201
    body = created.json()
    hook = Webhook.objects.get(pk=body["id"])
    assert body["secret"] == hook.secret and len(hook.secret) == 64  # shown in full once
    assert admin_api.get(f"/api/webhooks/{hook.pk}/").json()["secret"] == "…" + hook.secret[-4:]
    assert AuditEvent.objects.filter(action="webhook.create", object_id=str(hook.pk)).exists()

    tested = admin_api.post(f"/api/webhooks/{hook.pk}/test/").json()
    assert tested["status"] == "delivered" and tested["event"] == "ping" and tested["response_status"] == 200
    assert signature_is_valid(receiver.requests[-1], hook.secret)
    receiver.fail_next(404)
    failed = admin_api.post(f"/api/webhooks/{hook.pk}/test/").json()
    assert failed["status"] == "failed" and failed["error"] == "the receiver answered 404"  # a test is not retried

    log = admin_api.get(f"/api/webhooks/{hook.pk}/deliveries/").json()
    assert [d["status"] for d in log["results"]] == ["failed", "delivered"]
    assert admin_api.get(f"/api/webhooks/{hook.pk}/deliveries/?status=failed").json()["count"] == 1

    paused = admin_api.patch(f"/api/webhooks/{hook.pk}/", {"active": False}, format="json")
    assert paused.status_code == 200 and paused.json()["active"] is False
    assert admin_api.delete(f"/api/webhooks/{hook.pk}/").status_code == 204
    assert not WebhookDelivery.objects.filter(webhook_id=hook.pk).exists()
    assert AuditEvent.objects.filter(action="webhook.delete", object_id=str(hook.pk)).exists()


@pytest.mark.django_db
@pytest.mark.parametrize("body, field", [
    ({"url": "ftp://example.org/hook"}, "url"),
    ({"url": "not a url"}, "url"),
    ({"url": "https://example.org/hook", "events": ["run.started"]}, "events"),
    ({"url": "https://example.org/hook", "events": ["ping"]}, "events"),
])
def test_a_bad_registration_is_refused_with_the_field_that_is_wrong(admin_api, body, field):
    refused = admin_api.post("/api/webhooks/", body, format="json")
    assert refused.status_code == 400 and field in refused.json()["error"]["details"]
    assert not Webhook.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("role", ["viewer", "curator", "reviewer"])
def test_only_admins_see_or_register_webhooks(make_user, role):
    client = APIClient()
    client.force_login(make_user(role))
    assert client.get("/api/webhooks/").status_code == 403
    assert client.post("/api/webhooks/", {"url": "https://example.org/hook"}, format="json").status_code == 403
    assert not Webhook.objects.exists()


# ---- end to end --------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_run_finished_by_the_worker_reaches_the_receiver_without_polling(world_kg, celery_worker_process, receiver):
    from verifier.models import Entity, Relation, VerificationTask

    hook = Webhook.objects.create(url=receiver.url + "/hook", events=["run.finished"])
    entity = {e.external_id: e for e in Entity.objects.filter(kg=world_kg)}
    task = VerificationTask.objects.create(kg=world_kg, head=entity["Q42"], relation=Relation.objects.get(kg=world_kg, external_id="P27"),
                                           tail=entity["Q145"])
    run = services.start_run(task=task)
    deadline = time.monotonic() + 120
    while not receiver.requests and time.monotonic() < deadline:
        time.sleep(0.2)
    assert receiver.requests, "no webhook delivery within 120 s"
    event = receiver.requests[0].json()
    assert event["event"] == "run.finished" and event["data"]["run"] == run.pk
    run.refresh_from_db()
    assert event["data"]["status"] == run.status and event["data"]["verdict"] == run.verdict
    assert signature_is_valid(receiver.requests[0], hook.secret)
    assert WebhookDelivery.objects.get(webhook=hook).status == WebhookDelivery.Status.DELIVERED


# ---- the workbench page --------------------------------------------------------------------------------

@pytest.mark.django_db
def test_the_webhooks_page_registers_tests_pauses_and_removes(make_user, receiver):
    from django.test import Client
    from django.urls import reverse

    client = Client()
    client.force_login(make_user("admin"))
    refused = client.post(reverse("webhook-list"), {"url": "javascript:alert(1)"})
    assert refused.status_code == 400 and "Enter a valid URL" in refused.content.decode() and not Webhook.objects.exists()

    page = client.post(reverse("webhook-list"), {"url": receiver.url + "/hook", "events": ["run.finished", "review.recorded"],
                                                 "description": "pipeline"}, follow=True)
    hook = Webhook.objects.get()
    html = page.content.decode()
    assert f"Its signing secret, shown this once: {hook.secret}" in html and hook.events == ["review.recorded", "run.finished"]

    tested = client.post(reverse("webhook-test", args=[hook.pk]), follow=True).content.decode()
    assert "Test delivered to webhook" in tested and "the receiver answered 200" in tested
    assert hook.secret not in tested  # after registration only its last four characters
    assert "<code>ping</code>" in tested

    client.post(reverse("webhook-toggle", args=[hook.pk]))
    hook.refresh_from_db()
    assert hook.active is False
    client.post(reverse("webhook-delete", args=[hook.pk]))
    assert not Webhook.objects.exists()

    client.force_login(make_user("reviewer"))
    assert client.get(reverse("webhook-list")).status_code == 403


# ---- internal addresses ----------------------------------------------------------------------------------

def _resolving(monkeypatch, name: str, address: str) -> None:
    """A local stand-in for DNS (outside the machine): ``name`` resolves to ``address``, every other name as usual."""
    real = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        return real(address if host == name else host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


@pytest.mark.django_db
def test_a_name_that_resolves_to_loopback_when_the_delivery_is_made_is_not_contacted(loopback_allowed, admin_api, receiver,
                                                                                    monkeypatch):
    port = receiver.url.rsplit(":", 1)[1]
    loopback_allowed.KGV_WEBHOOK_ALLOWED_NETWORKS = []
    _resolving(monkeypatch, "hooks.example.org", "93.184.215.14")  # a public address at registration
    created = admin_api.post("/api/webhooks/", {"url": f"http://hooks.example.org:{port}/hook"}, format="json")
    assert created.status_code == 201
    hook = Webhook.objects.get()

    _resolving(monkeypatch, "hooks.example.org", "127.0.0.1")  # the DNS answer changed since
    tested = admin_api.post(f"/api/webhooks/{hook.pk}/test/").json()
    assert tested["status"] == "failed" and tested["response_status"] is None
    assert "hooks.example.org resolves to 127.0.0.1, which is a loopback address" in tested["error"]
    assert receiver.requests == []  # nothing reached the machine itself

    loopback_allowed.KGV_WEBHOOK_ALLOWED_NETWORKS = [ipaddress.ip_network("127.0.0.1/32")]  # the operator allows it
    tested = admin_api.post(f"/api/webhooks/{hook.pk}/test/").json()
    assert tested["status"] == "delivered"
    assert receiver.requests[-1].header("Host") == f"hooks.example.org:{port}"  # sent to the address checked, by name


@pytest.mark.django_db
def test_the_log_keeps_the_status_timing_and_a_short_escaped_excerpt_never_the_answer(admin_api, receiver):
    answer = "secret-token\x1b[31m\n" + "x" * 10_000
    receiver.route("/hook", Reply(answer, status=200))
    hook = Webhook.objects.create(url=receiver.url + "/hook")
    delivered = admin_api.post(f"/api/webhooks/{hook.pk}/test/").json()
    assert delivered["status"] == "delivered" and delivered["duration_ms"] is not None and delivered["duration_ms"] >= 0
    excerpt = delivered["response_excerpt"]
    assert excerpt.startswith("secret-token\\x1b[31m\\n") and len(excerpt) <= webhooks.EXCERPT_CHARS + 10
    assert "response_body" not in delivered
    listed = admin_api.get(f"/api/webhooks/{hook.pk}/deliveries/").json()["results"][0]
    assert listed["response_excerpt"] == excerpt and "x" * 500 not in str(listed)
