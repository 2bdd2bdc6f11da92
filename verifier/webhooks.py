"""Signed POSTs to the webhooks an admin registered, on run finished, review recorded and memory promoted.

``emit`` records one delivery per subscribed webhook in the transaction that made the change, and queues its
first attempt after the commit. ``deliver`` POSTs it: the body is the event as JSON, and the headers carry

    KGV-Event: run.finished
    KGV-Delivery: 42                      (the delivery id; a receiver can drop a repeat it has seen)
    KGV-Signature: t=1764000000,v1=<hex>  (HMAC-SHA256 of "<t>.<body>" with the webhook's secret)

A 2xx answer delivers it. Anything else (an error status, a timeout, a refused connection) is tried again
after 30 s, 2 min, 10 min, 30 min and 2 h (or the receiver's Retry-After, up to an hour), then given up as
failed; the delivery log keeps the last attempt's status, duration, error and the start of the answer (200
characters, escaped: the answer itself is never kept, so a URL cannot be used to read what another server says).
Retries are not broker messages: the due deliveries are sent by the minute sweep (Celery beat), so a broker restart
loses none.

Deliveries go out through verifier.outbound's client: a URL whose host resolves (now) to an internal address is
not contacted — the delivery fails at once with the reason, as registering such a URL is refused.

Checking a signature, in a receiver::

    expected = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    hmac.compare_digest(expected, v1) and abs(time.time() - int(t)) < 300
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
import uuid
from datetime import timedelta

import requests
from django.db import transaction
from django.utils import timezone

from verifier import outbound
from verifier.models import MemoryEntry, Review, Run
from verifier.models.webhooks import Webhook, WebhookDelivery
from verifier.queueing import DELIVER_WEBHOOK, enqueue
from verifier.retrying import retry_after

logger = logging.getLogger(__name__)

BACKOFF_SECONDS = (30, 120, 600, 1800, 7200)  # waits after the 1st … 5th failed attempt; the 6th failure gives up
MAX_RETRY_AFTER_SECONDS = 3600
TIMEOUT_SECONDS = 10
USER_AGENT = "KGV-Webhooks/1"
EXCERPT_CHARS = 200  # of the receiver's answer, kept in the log


def excerpt(raw: bytes) -> str:
    """The start of an answer as the log keeps it: at most EXCERPT_CHARS characters, anything unprintable escaped."""
    text = raw.decode("utf-8", "replace")[:EXCERPT_CHARS]
    return "".join(char if char.isprintable() else char.encode("unicode_escape").decode("ascii") for char in text)


def signature(secret: str, timestamp: int, body: bytes) -> str:
    return hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def body_of(delivery: WebhookDelivery) -> bytes:
    return json.dumps(delivery.payload, sort_keys=True, separators=(",", ":")).encode()


def _triple(task) -> dict:
    return {"head": {"id": task.head.external_id, "label": task.head.label},
            "relation": {"id": task.relation.external_id, "label": task.relation.label},
            "tail": {"id": task.tail.external_id, "label": task.tail.label}, "kg": task.kg.name}


def run_data(run: Run) -> dict:
    task = run.task
    return {"run": run.pk, "task": task.pk, "triple": _triple(task), "status": run.status, "verdict": run.verdict,
            "confidence": run.confidence, "disputed": run.disputed, "error": run.error,
            "finished_at": run.finished_at.isoformat() if run.finished_at else None, "url": f"/api/runs/{run.pk}/"}


def review_data(review: Review) -> dict:
    return {"review": review.pk, "run": review.run_id, "task": review.run.task_id, "triple": _triple(review.run.task),
            "decision": review.decision, "verdict": review.verdict, "reason": review.reason,
            "reviewer": review.reviewer.username, "agent_verdict": review.run.verdict, "url": f"/api/runs/{review.run_id}/"}


def memory_data(entry: MemoryEntry) -> dict:
    return {"memory": entry.pk, "run": entry.source_run_id, "triple_text": entry.triple_text, "verdict": entry.verdict,
            "promoted_by": entry.promoted_by.username if entry.promoted_by else None, "url": f"/api/memory/{entry.pk}/"}


def emit(event: str, key: str, data: dict) -> list[WebhookDelivery]:
    """Record the event for every active webhook that subscribes to it (once per webhook and ``key``) and send
    each after the surrounding transaction commits. Call inside the transaction that made the change."""
    hooks = [hook for hook in Webhook.objects.filter(active=True) if hook.wants(event)]
    if not hooks:
        return []
    payload = {"event": event, "created_at": timezone.now().isoformat(), "data": data}
    created = []
    for hook in hooks:
        delivery, new = WebhookDelivery.objects.get_or_create(
            webhook=hook, key=key, defaults={"event": event, "payload": payload, "next_attempt_at": timezone.now()})
        if new:
            created.append(delivery)
    if created:
        for delivery in created:
            enqueue(DELIVER_WEBHOOK, delivery.pk)
    return created


def ping(webhook: Webhook) -> WebhookDelivery:
    """A test delivery, sent now (the admin's test button waits for the answer)."""
    payload = {"event": Webhook.Event.PING, "created_at": timezone.now().isoformat(),
               "data": {"webhook": webhook.pk, "message": "KGV can reach this URL"}}
    delivery = WebhookDelivery.objects.create(webhook=webhook, event=Webhook.Event.PING, key=f"ping:{uuid.uuid4().hex}",
                                              payload=payload, next_attempt_at=timezone.now())
    return deliver(delivery.pk, retry=False)


def _wait_after(attempts: int, asked: float | None) -> float | None:
    """Seconds before the next attempt after ``attempts`` failures; None: give up."""
    if attempts > len(BACKOFF_SECONDS):
        return None
    if asked is not None:
        return min(asked, MAX_RETRY_AFTER_SECONDS)
    return BACKOFF_SECONDS[attempts - 1]


def deliver(delivery_id: int, *, retry: bool = True) -> WebhookDelivery | None:
    """One attempt at a pending delivery that is due (a concurrent attempt at the same one is skipped)."""
    with transaction.atomic():
        delivery = (WebhookDelivery.objects.select_for_update(skip_locked=True).select_related("webhook")
                    .filter(pk=delivery_id, status=WebhookDelivery.Status.PENDING).first())
        if delivery is None:
            return WebhookDelivery.objects.filter(pk=delivery_id).first()
        if delivery.next_attempt_at and delivery.next_attempt_at > timezone.now():
            return delivery
        body, now = body_of(delivery), int(time.time())
        headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT, "KGV-Event": delivery.event,
                   "KGV-Delivery": str(delivery.pk), "KGV-Signature": f"t={now},v1={signature(delivery.webhook.secret, now, body)}"}
        delivery.attempts += 1
        asked, refused = None, False
        started = time.monotonic()
        try:
            asked = _post(delivery, body, headers)
        except outbound.OutboundRefused as error:
            delivery.response_status, delivery.response_excerpt = None, ""
            delivery.error, refused = f"not sent: {error}", True
        except requests.RequestException as error:
            delivery.response_status, delivery.response_excerpt = None, ""
            delivery.error = f"{type(error).__name__}: {error}"[:2000]
        delivery.duration_ms = round((time.monotonic() - started) * 1000)
        if delivery.response_status is not None and 200 <= delivery.response_status < 300:
            delivery.status, delivery.delivered_at, delivery.next_attempt_at = WebhookDelivery.Status.DELIVERED, timezone.now(), None
        else:
            wait = _wait_after(delivery.attempts, asked) if retry and not refused else None
            if wait is None:
                delivery.status, delivery.next_attempt_at = WebhookDelivery.Status.FAILED, None
                logger.warning("webhook delivery %s to %s failed for good: %s", delivery.pk, delivery.webhook.url, delivery.error)
            else:
                delivery.next_attempt_at = timezone.now() + timedelta(seconds=wait)
        delivery.save()
    return delivery


def _post(delivery: WebhookDelivery, body: bytes, headers: dict) -> float | None:
    """One POST of the delivery, its status, error and the start of the answer recorded on it (the rest of the answer
    is never read); the receiver's Retry-After in seconds, if it gave one. OutboundRefused when the URL is one KGV
    does not send to (a webhook registered before the rules, or a name that now resolves to an internal address)."""
    outbound.check_form(delivery.webhook.url)
    with outbound.session() as client, client.post(delivery.webhook.url, data=body, headers=headers, timeout=TIMEOUT_SECONDS,
                                                   allow_redirects=False, stream=True) as response:
        delivery.response_status = response.status_code
        delivery.response_excerpt = excerpt(next(response.iter_content(EXCERPT_CHARS * 4), b""))
        delivery.error = "" if response.ok else f"the receiver answered {response.status_code}"
        return retry_after(response.headers)


def deliver_due() -> int:
    """Attempt every pending delivery whose time has come (the minute sweep). Returns how many were tried."""
    due = list(WebhookDelivery.objects.filter(status=WebhookDelivery.Status.PENDING, next_attempt_at__lte=timezone.now())
               .order_by("next_attempt_at").values_list("pk", flat=True)[:500])
    for pk in due:
        deliver(pk)
    return len(due)
