"""Webhooks: URLs an admin registers to be told, by a signed POST, when a run finishes, a review is recorded or
a memory is promoted; and the log of every delivery (verifier/webhooks.py sends them)."""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models


def new_secret() -> str:
    return secrets.token_hex(32)


class Webhook(models.Model):
    class Event(models.TextChoices):
        RUN_FINISHED = "run.finished", "A run finished (succeeded, failed or cancelled)"
        REVIEW_RECORDED = "review.recorded", "A review was recorded"
        MEMORY_PROMOTED = "memory.promoted", "A run was promoted into the memory bank"
        PING = "ping", "A test delivery"

    url = models.URLField(max_length=1000, help_text="receives a POST of JSON for every event it subscribes to")
    events = models.JSONField(default=list, blank=True, help_text="event names; empty: every event")
    secret = models.CharField(max_length=100, default=new_secret, help_text="HMAC-SHA256 key of the KGV-Signature header")
    description = models.CharField(max_length=200, blank=True)
    active = models.BooleanField(default=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def wants(self, event: str) -> bool:
        return self.active and (event == self.Event.PING or not self.events or event in self.events)

    def __str__(self) -> str:
        return f"webhook {self.pk} → {self.url}"


class WebhookDelivery(models.Model):
    """One event for one webhook: tried at once, then again with back-off until it is taken or given up."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"  # waiting for its next attempt
        DELIVERED = "delivered", "Delivered"
        FAILED = "failed", "Failed"  # gave up after the last attempt

    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    event = models.CharField(max_length=40)
    key = models.CharField(max_length=100, help_text="the event's identity ('run.finished:12'): one delivery per webhook")
    payload = models.JSONField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING, db_index=True)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True, db_index=True)
    response_status = models.PositiveIntegerField(null=True, blank=True)
    response_excerpt = models.TextField(blank=True, help_text="the start of the receiver's last answer (at most 200 "
                                                              "characters, anything unprintable escaped); the answer itself is not kept")
    duration_ms = models.PositiveIntegerField(null=True, blank=True, help_text="how long the last attempt took")
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["webhook", "key"], name="one_delivery_per_event_and_webhook")]

    def __str__(self) -> str:
        return f"{self.event} to webhook {self.webhook_id}: {self.status}"
