"""The webhooks page (admins): register a URL for some events, send it a test, pause or remove it, and read
the log of its latest deliveries. The API offers the same (``/api/webhooks/``); both write through
verifier.services and deliver through verifier.webhooks."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import path, reverse
from django.views.decorators.http import require_http_methods, require_POST

from verifier import services
from verifier.models import Webhook, WebhookDelivery
from verifier.outbound import validate_url
from verifier.roles import ADMIN, role_required

LOG_LENGTH = 10
EVENT_CHOICES = [(value, label) for value, label in Webhook.Event.choices if value != Webhook.Event.PING]


class WebhookForm(forms.Form):
    url = forms.CharField(label="URL", max_length=1000, validators=[validate_url],
                          widget=forms.URLInput(attrs={"placeholder": "https://pipeline.example.org/kgv", "size": 50}))
    events = forms.MultipleChoiceField(choices=EVENT_CHOICES, required=False, widget=forms.CheckboxSelectMultiple,
                                       help_text="None ticked: every event.")
    description = forms.CharField(max_length=200, required=False)


def _page(request: HttpRequest, form: WebhookForm, status: int = 200) -> HttpResponse:
    hooks = list(Webhook.objects.all())
    for hook in hooks:
        hook.log = list(hook.deliveries.all()[:LOG_LENGTH])
        hook.failing = hook.deliveries.filter(status=WebhookDelivery.Status.FAILED).count()
    return render(request, "verifier/webhooks.html", {"form": form, "hooks": hooks, "labels": dict(Webhook.Event.choices)},
                  status=status)


@require_http_methods(["GET", "POST"])
@role_required(ADMIN)
def webhook_list(request: HttpRequest) -> HttpResponse:
    """GET: the registered webhooks and their latest deliveries. POST: register one (its secret is shown once)."""
    if request.method == "GET":
        return _page(request, WebhookForm())
    form = WebhookForm(request.POST)
    if not form.is_valid():
        return _page(request, form, status=400)
    hook = services.save_webhook(webhook=None, actor=request.user, url=form.cleaned_data["url"],
                                 events=sorted(form.cleaned_data["events"]), description=form.cleaned_data["description"])
    messages.success(request, f"Webhook {hook.pk} registered. Its signing secret, shown this once: {hook.secret}")
    return redirect(reverse("webhook-list"))


@require_POST
@role_required(ADMIN)
def webhook_test(request: HttpRequest, webhook_id: int) -> HttpResponse:
    delivery = services.send_test_delivery(webhook=get_object_or_404(Webhook, pk=webhook_id), actor=request.user)
    if delivery.status == WebhookDelivery.Status.DELIVERED:
        messages.success(request, f"Test delivered to webhook {webhook_id}: the receiver answered {delivery.response_status}.")
    else:
        messages.error(request, f"Test to webhook {webhook_id} failed: {delivery.error}.")
    return redirect(reverse("webhook-list"))


@require_POST
@role_required(ADMIN)
def webhook_toggle(request: HttpRequest, webhook_id: int) -> HttpResponse:
    hook = get_object_or_404(Webhook, pk=webhook_id)
    services.save_webhook(webhook=hook, actor=request.user, active=not hook.active)
    messages.success(request, f"Webhook {hook.pk} {'resumed' if hook.active else 'paused'}.")
    return redirect(reverse("webhook-list"))


@require_POST
@role_required(ADMIN)
def webhook_delete(request: HttpRequest, webhook_id: int) -> HttpResponse:
    services.delete_webhook(webhook=get_object_or_404(Webhook, pk=webhook_id), actor=request.user)
    messages.success(request, f"Webhook {webhook_id} removed with its delivery log.")
    return redirect(reverse("webhook-list"))


urlpatterns = [
    path("webhooks/", webhook_list, name="webhook-list"),
    path("webhooks/<int:webhook_id>/test/", webhook_test, name="webhook-test"),
    path("webhooks/<int:webhook_id>/toggle/", webhook_toggle, name="webhook-toggle"),
    path("webhooks/<int:webhook_id>/delete/", webhook_delete, name="webhook-delete"),
]
