"""``/api/webhooks/``: the webhooks an admin registers, a test delivery, and each webhook's delivery log.

The secret that signs deliveries is shown once, in the answer to the POST that registers the webhook;
afterwards only its last four characters (verifier/webhooks.py documents the signature).
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from verifier import services
from verifier.models import Webhook, WebhookDelivery
from verifier.outbound import validate_url
from verifier.roles import ADMIN

SUBSCRIBABLE = [event for event in Webhook.Event.values if event != Webhook.Event.PING]


class WebhookSerializer(serializers.ModelSerializer):
    url = serializers.CharField(max_length=1000, validators=[validate_url],
                                help_text="an http(s) URL that receives the POSTs: a public address, without credentials "
                                          "(internal addresses are refused unless an operator allowed their network)")
    events = serializers.ListField(child=serializers.ChoiceField(choices=SUBSCRIBABLE), required=False, default=list,
                                   max_length=len(SUBSCRIBABLE), help_text="empty: every event")
    secret = serializers.SerializerMethodField(help_text="the signing key in full in the answer to the registration, "
                                                         "afterwards its last four characters")

    class Meta:
        model = Webhook
        fields = ["id", "url", "events", "description", "active", "secret", "created_at"]
        read_only_fields = ["id", "secret", "created_at"]

    def get_secret(self, webhook: Webhook) -> str:
        return webhook.secret if self.context.get("reveal_secret") else f"…{webhook.secret[-4:]}"

    def validate_events(self, events: list[str]) -> list[str]:
        return sorted(set(events))


class WebhookDeliverySerializer(serializers.ModelSerializer):
    class Meta:
        model = WebhookDelivery
        fields = ["id", "webhook", "event", "key", "status", "attempts", "next_attempt_at", "response_status",
                  "response_excerpt", "duration_ms", "error", "payload", "created_at", "delivered_at"]
        read_only_fields = fields


class WebhookViewSet(viewsets.ModelViewSet):
    """Signed POSTs to other systems on ``run.finished``, ``review.recorded`` and ``memory.promoted`` (admins only)."""

    queryset = Webhook.objects.all()
    serializer_class = WebhookSerializer
    read_role = ADMIN
    write_role = ADMIN
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def perform_create(self, serializer):
        serializer.instance = services.save_webhook(webhook=None, actor=self.request.user, **serializer.validated_data)
        serializer.context["reveal_secret"] = True

    def perform_update(self, serializer):
        serializer.instance = services.save_webhook(webhook=serializer.instance, actor=self.request.user,
                                                    **serializer.validated_data)

    def perform_destroy(self, instance):
        services.delete_webhook(webhook=instance, actor=self.request.user)

    @extend_schema(request=None, responses={200: WebhookDeliverySerializer})
    @action(detail=True, methods=["post"])
    def test(self, request: Request, pk=None) -> Response:
        """Send a ``ping`` event now and answer with its delivery: ``delivered``, or ``failed`` with the receiver's
        status or the connection error. A test is not retried."""
        delivery = services.send_test_delivery(webhook=self.get_object(), actor=request.user)
        return Response(WebhookDeliverySerializer(delivery).data, status=status.HTTP_200_OK)

    @extend_schema(parameters=[OpenApiParameter("status", str, enum=WebhookDelivery.Status.values)],
                   responses={200: WebhookDeliverySerializer(many=True)})
    @action(detail=True, methods=["get"])
    def deliveries(self, request: Request, pk=None) -> Response:
        """The webhook's delivery log, newest first: every event, its attempts and the last answer."""
        deliveries = self.get_object().deliveries.all()
        if wanted := request.query_params.get("status"):
            if wanted not in WebhookDelivery.Status.values:
                raise serializers.ValidationError({"status": [f"one of {', '.join(WebhookDelivery.Status.values)}"]})
            deliveries = deliveries.filter(status=wanted)
        page = self.paginate_queryset(deliveries)
        return self.get_paginated_response(WebhookDeliverySerializer(page, many=True).data)
