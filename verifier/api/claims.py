"""Claims in plain language over the API: submit one or import a file (curator; a worker decomposes each claim and starts a run per part),
list, read with the pseudo-subgraph, each part's task and run, and the claim's verdict; retry a failed claim; review it."""

from __future__ import annotations

from django.db import transaction
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import exceptions, mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from verifier.claims.importing import MAX_CLAIM_CHARS, ClaimFileError, read_claims_upload
from verifier.claims.pipeline import (
    ClaimError,
    PartView,
    outcome,
    parts_of,
    queue_claim,
    retry_claim,
    review_claim,
    submit_claim,
    submit_claims,
)
from verifier.claims.verdict import ClaimVerdict
from verifier.errors import listed
from verifier.models import Claim, ClaimReview, KnowledgeGraph
from verifier.params import get_id
from verifier.roles import REVIEWER, has_role


class ClaimCreateSerializer(serializers.Serializer):
    kg = serializers.PrimaryKeyRelatedField(queryset=KnowledgeGraph.objects.filter(kind=KnowledgeGraph.Kind.LOCAL, version__gt=0))
    text = serializers.CharField(max_length=MAX_CLAIM_CHARS)
    category = serializers.ChoiceField(choices=Claim.Category.choices, required=False, allow_blank=True, default="")
    expected_label = serializers.BooleanField(required=False, allow_null=True, default=None)


class ClaimImportSerializer(serializers.Serializer):
    kg = serializers.PrimaryKeyRelatedField(queryset=KnowledgeGraph.objects.filter(kind=KnowledgeGraph.Kind.LOCAL, version__gt=0))
    file = serializers.FileField(help_text="claims: .txt (one per line), .csv (a 'claim' column, optional 'label' and "
                                           "'category') or .jsonl ({\"claim\", \"label\", \"category\"})")


class ClaimImportResultSerializer(serializers.Serializer):
    claims = serializers.ListField(child=serializers.IntegerField(), help_text="the ids of the claims queued, in file order")
    problems = serializers.ListField(child=serializers.CharField(), help_text="the rows not taken: 'line N: why' (the first 100)")
    problem_count = serializers.IntegerField(help_text="how many rows were not taken")


class ClaimReviewSerializer(serializers.ModelSerializer):
    reviewer = serializers.CharField(source="reviewer.get_username", read_only=True)

    class Meta:
        model = ClaimReview
        fields = ["id", "reviewer", "decision", "verdict", "reason", "created_at"]
        read_only_fields = ["id", "reviewer", "created_at"]
        extra_kwargs = {"verdict": {"required": False, "help_text": "override only: the verdict, where the parts give none"},
                        "reason": {"required": False}}


class ClaimSerializer(serializers.ModelSerializer):
    verdict = serializers.SerializerMethodField(
        help_text="supported, refuted, not_enough_evidence or open: a reviewer's decision on the claim, else from the "
                  "parts' verdicts; refused for a claim the KG cannot check (``error`` says why)")
    verdict_from_parts = serializers.SerializerMethodField(help_text="the verdict the parts give, whatever a reviewer decided")
    decided_by = serializers.SerializerMethodField(help_text="the reviewer whose decision on the claim stands, or empty")
    reviews = ClaimReviewSerializer(many=True, read_only=True)
    confidence = serializers.SerializerMethodField(help_text="probability that the verdict is right (null: unknown)")
    justification = serializers.SerializerMethodField()
    parts = serializers.SerializerMethodField(help_text="each triple of the pseudo-subgraph, its task and its run")

    class Meta:
        model = Claim
        fields = ["id", "kg", "text", "status", "error", "category", "expected_label", "source", "model", "written",
                  "left_out", "resolution", "parts", "verdict", "verdict_from_parts", "decided_by", "confidence", "justification",
                  "reviews", "created_at"]
        read_only_fields = fields

    def _state(self, claim: Claim) -> tuple[list[PartView], ClaimVerdict]:
        """The claim's parts and verdict, read once per claim and serialization."""
        cache = self.context.setdefault("claim_states", {})
        if claim.pk not in cache:
            parts = parts_of(claim)
            cache[claim.pk] = parts, outcome(claim, parts)
        return cache[claim.pk]

    def get_verdict(self, claim: Claim) -> str:
        return self._state(claim)[1].verdict

    def get_verdict_from_parts(self, claim: Claim) -> str:
        return self._state(claim)[1].from_parts

    def get_decided_by(self, claim: Claim) -> str:
        return self._state(claim)[1].decided_by

    def get_confidence(self, claim: Claim) -> float | None:
        return self._state(claim)[1].confidence

    def get_justification(self, claim: Claim) -> str:
        return self._state(claim)[1].justification

    def get_parts(self, claim: Claim) -> list[dict]:
        return [{**view.row, "task": view.part.task_id if view.part else None,
                 "run": view.run.pk if view.run else None, "run_status": view.run.status if view.run else "",
                 "triple_verdict": view.outcome.verdict, "triple_confidence": view.outcome.confidence,
                 "state": view.outcome.state} for view in self._state(claim)[0]]


@extend_schema_view(list=extend_schema(parameters=[
    OpenApiParameter("kg", int), OpenApiParameter("status", str, enum=Claim.Status.values),
    OpenApiParameter("q", str, description="search in the claim's text")]))
class ClaimViewSet(mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    queryset = Claim.objects.all()
    serializer_class = ClaimSerializer

    def get_queryset(self):
        claims = Claim.objects.prefetch_related("reviews__reviewer")
        params = self.request.query_params
        if self.action == "list":
            if (kg := get_id(params, "kg", hint="a knowledge-graph id")) is not None:
                claims = claims.filter(kg_id=kg)
            if claim_status := params.get("status"):
                if claim_status not in Claim.Status.values:
                    raise exceptions.ValidationError({"status": [f"one of {', '.join(Claim.Status.values)}"]})
                claims = claims.filter(status=claim_status)
            if text := params.get("q", "").replace("\x00", ""):
                claims = claims.filter(text__icontains=text)
        return claims

    @extend_schema(request=ClaimCreateSerializer, responses={201: ClaimSerializer})
    def create(self, request: Request, *args, **kwargs) -> Response:
        form = ClaimCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        try:
            with transaction.atomic():
                claim = submit_claim(kg=data["kg"], text=data["text"], actor=request.user, source="api",
                                     category=data["category"], expected_label=data["expected_label"])
                queue_claim(claim)
        except ClaimError as error:
            raise exceptions.ValidationError({"text": [str(error)]}) from None
        return Response(ClaimSerializer(claim).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={200: ClaimSerializer})
    @action(detail=True, methods=["post"])
    def retry(self, request: Request, pk=None) -> Response:
        """Queue a failed claim again (its model could not be asked, or its reply was no pseudo-subgraph)."""
        try:
            claim = retry_claim(claim=self.get_object(), actor=request.user)
        except ClaimError as error:
            raise exceptions.ValidationError({"status": [str(error)]}) from None
        return Response(ClaimSerializer(claim).data)

    @extend_schema(request=ClaimReviewSerializer, responses={201: ClaimSerializer})
    @action(detail=True, methods=["post"])
    def review(self, request: Request, pk=None) -> Response:
        """Accept or override the claim's verdict as a whole (it then stands whatever the parts say), or comment."""
        form = ClaimReviewSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        if form.validated_data["decision"] != ClaimReview.Decision.COMMENT and not has_role(request.user, REVIEWER):
            raise exceptions.PermissionDenied("Deciding on a claim's verdict needs the reviewer role; curators may comment.")
        claim = self.get_object()
        try:
            review_claim(claim=claim, reviewer=request.user, decision=form.validated_data["decision"],
                         reason=form.validated_data.get("reason", ""), verdict=form.validated_data.get("verdict", ""))
        except ClaimError as error:
            raise exceptions.ValidationError({"decision": [str(error)]}) from None
        return Response(ClaimSerializer(Claim.objects.get(pk=claim.pk)).data, status=status.HTTP_201_CREATED)

    @extend_schema(request={"multipart/form-data": ClaimImportSerializer}, responses={201: ClaimImportResultSerializer})
    @action(detail=False, methods=["post"], url_path="import")
    def import_file(self, request: Request) -> Response:
        """Queue every readable row of a claims file; the rows that cannot be taken are listed, each with its line."""
        form = ClaimImportSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        upload = form.validated_data["file"]
        try:
            read = read_claims_upload(upload)
            claims = submit_claims(kg=form.validated_data["kg"], read=read, actor=request.user, source=upload.name)
        except (ClaimFileError, ClaimError) as error:
            raise exceptions.ValidationError({"file": [str(error)]}) from None
        return Response({"claims": [claim.pk for claim in claims], "problems": listed(read.problems),
                         "problem_count": len(read.problems)}, status=status.HTTP_201_CREATED)
