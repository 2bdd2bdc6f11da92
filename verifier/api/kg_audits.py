"""KG audits over the API (not the audit log, ``/api/audit/``): list and read them with their progress, metrics and
summary; start one on a KG (curator; the audit workers score it); page through its suspects by relation; queue its top
suspects as flagged triples (curator); download the suspects as CSV. Writes go through verifier.kg_audit.pipeline, as
the pages' do; a request the audit's state refuses is a 409."""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from verifier.api.errors import Conflict
from verifier.api.serializers import TermSerializer, UserRefSerializer
from verifier.api.views import FileContentNegotiation
from verifier.kg_audit import exports
from verifier.kg_audit.pipeline import AuditError, queue_suspects, start_audit
from verifier.kg_audit.selectors import auditable_kgs, audits, suspects
from verifier.models import KGAudit, Suspect
from verifier.params import get_id
from verifier.roles import VIEWER


class KGAuditSerializer(serializers.ModelSerializer):
    kg_name = serializers.CharField(source="kg.name", read_only=True)
    progress = serializers.FloatField(read_only=True, help_text="share of the triples scored, 0–1")
    stale = serializers.BooleanField(source="is_stale", read_only=True,
                                     help_text="queued or running, but no audit worker has reported for several minutes")
    created_by = UserRefSerializer(read_only=True, allow_null=True)

    class Meta:
        model = KGAudit
        fields = ["id", "kg", "kg_name", "kg_version", "status", "stage", "triples", "scored", "progress", "stale",
                  "structural_model", "previous", "error", "created_by", "created_at", "started_at", "finished_at"]
        read_only_fields = fields


class KGAuditDetailSerializer(KGAuditSerializer):
    relations = serializers.SerializerMethodField(
        help_text="suspects per relation with the relation's label: relation, label, suspects, likely_wrong, triples, share")

    class Meta(KGAuditSerializer.Meta):
        fields = [*KGAuditSerializer.Meta.fields, "metrics", "summary", "relations"]
        read_only_fields = fields
        extra_kwargs = {"metrics": {"help_text": "how well the classifier tells the KG's facts from corruptions, out of fold: "
                                                 "auc (all and per kind of corruption), facts, corruptions, features"},
                        "summary": {"help_text": "histogram (counts, edges), likely_wrong (suspicion 0.5 or above), suspects, "
                                                 "per_relation, compared (new, gone, kept; null without a previous audit)"}}

    def get_relations(self, audit: KGAudit) -> list[dict]:
        return exports.relation_rows(audit)


class KGAuditCreateSerializer(serializers.Serializer):
    kg = serializers.PrimaryKeyRelatedField(queryset=auditable_kgs(), help_text="a local KG with triples loaded")


class SuspectSerializer(serializers.ModelSerializer):
    head = TermSerializer(read_only=True)
    relation = TermSerializer(read_only=True)
    tail = TermSerializer(read_only=True)

    class Meta:
        model = Suspect
        fields = ["rank", "suspicion", "head", "relation", "tail", "reasons", "new", "task"]
        read_only_fields = fields
        extra_kwargs = {"reasons": {"help_text": "what stands out about it, most telling first: [{code, text}]"},
                        "task": {"help_text": "the flagged triple it was queued as, or null"}}


class QueueSuspectsSerializer(serializers.Serializer):
    top = serializers.IntegerField(min_value=1, required=False, allow_null=True, help_text="the top N suspects")
    threshold = serializers.FloatField(min_value=0.0, max_value=1.0, required=False, allow_null=True,
                                       help_text="every suspect with suspicion at least this (both: the top N of those)")

    def validate(self, data: dict) -> dict:
        if data.get("top") is None and data.get("threshold") is None:
            raise serializers.ValidationError("give top (the top N suspects), threshold (a suspicion from 0 to 1) or both")
        return data


class QueuedSerializer(serializers.Serializer):
    queued = serializers.IntegerField(help_text="suspects queued as flagged triples now (those queued before are left)")


@extend_schema_view(list=extend_schema(parameters=[OpenApiParameter("kg", int, description="only this KG's audits")]))
class KGAuditViewSet(mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Every triple of a KG ranked by how likely it is wrong: the audits, newest first."""

    queryset = KGAudit.objects.all()

    def get_queryset(self):
        kg = get_id(self.request.query_params, "kg", hint="a knowledge-graph id") if self.action == "list" else None
        return audits(kg)

    def get_serializer_class(self):
        return KGAuditSerializer if self.action == "list" else KGAuditDetailSerializer

    @extend_schema(request=KGAuditCreateSerializer, responses={
        201: KGAuditDetailSerializer, 409: OpenApiResponse(description="an audit of the KG is still running, or it has no "
                                                                       "triples of its own")})
    def create(self, request: Request, *args, **kwargs) -> Response:
        """Start an audit of the KG's current version on the audit workers → 201 with the queued audit."""
        form = KGAuditCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            audit = start_audit(kg=form.validated_data["kg"], actor=request.user)
        except AuditError as error:
            raise Conflict(str(error)) from None
        return Response(KGAuditDetailSerializer(audits().get(pk=audit.pk)).data, status=status.HTTP_201_CREATED)

    @extend_schema(parameters=[OpenApiParameter("relation", int, description="only this relation's suspects (its id)")],
                   responses={200: SuspectSerializer(many=True)})
    @action(detail=True, methods=["get"])
    def suspects(self, request: Request, pk=None) -> Response:
        """The audit's suspects by rank (paginated), each with its reasons and the task it was queued as."""
        audit = self.get_object()
        relation = get_id(request.query_params, "relation", hint="a relation id")
        page = self.paginate_queryset(suspects(audit, relation=relation))
        return self.get_paginated_response(SuspectSerializer(page, many=True).data)

    @extend_schema(request=QueueSuspectsSerializer, responses={
        200: QueuedSerializer, 409: OpenApiResponse(description="the audit has not finished")})
    @action(detail=True, methods=["post"])
    def queue(self, request: Request, pk=None) -> Response:
        """Queue the top N suspects (or those at a suspicion or above) as flagged triples (source ``audit:<id>``); the
        queue's ``kg_audit=<id>`` filter lists them."""
        form = QueueSuspectsSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            queued = queue_suspects(audit=self.get_object(), actor=request.user, top=form.validated_data.get("top"),
                                    threshold=form.validated_data.get("threshold"))
        except AuditError as error:
            raise Conflict(str(error)) from None
        return Response({"queued": queued})


class KGAuditCSVView(APIView):
    """``/api/kg-audits/<id>/suspects.csv``: the finished audit's suspects, one row each (409 before it has finished)."""

    read_role = VIEWER
    content_negotiation_class = FileContentNegotiation

    @extend_schema(responses={200: OpenApiResponse(OpenApiTypes.BINARY, description="the suspects as CSV"),
                              409: OpenApiResponse(description="the audit has not finished")})
    def get(self, request: Request, pk: int) -> HttpResponse:
        audit = get_object_or_404(KGAudit.objects.select_related("kg").defer("scorer"), pk=pk)
        if audit.status != KGAudit.Status.FINISHED:
            raise Conflict(f"KG audit #{audit.pk} is {audit.status}: its suspects are known when it has finished")
        response = HttpResponse(exports.to_csv(audit), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{exports.file_name(audit, "csv")}"'
        return response
