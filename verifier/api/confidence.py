"""``/api/confidence-models/``: the verdict confidence models, and what an admin does with them on the confidence page —
put one in force or stand a KG's own down (the KG's finished runs are re-weighed in the background), fit a candidate on
a KG's reviewed runs, and give a KG weighed by the model for every KG a weighing of its own from its verified
structural calibration triples (verifier/confidence_own.py)."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from verifier import confidence_own, confidence_reviews
from verifier.api.errors import Conflict
from verifier.models import ConfidenceModel, KnowledgeGraph
from verifier.params import get_id, parse_id, single
from verifier.roles import ADMIN


class ConfidenceModelSerializer(serializers.ModelSerializer):
    kg_name = serializers.CharField(source="kg.name", read_only=True, allow_null=True, default=None,
                                    help_text="the KG it weighs; null: every KG without a model of its own")
    n = serializers.SerializerMethodField(help_text="labelled runs it was fitted on")
    cross_validated = serializers.SerializerMethodField(
        help_text="out-of-fold figures on those runs: combined_accuracy, ece, structural_accuracy, folds, …")

    class Meta:
        model = ConfidenceModel
        fields = ["id", "kg", "kg_name", "active", "source", "features", "coefficients", "intercept", "n", "cross_validated",
                  "created_at"]
        read_only_fields = fields

    def get_n(self, model: ConfidenceModel) -> int | None:
        return (model.metrics or {}).get("n")

    def get_cross_validated(self, model: ConfidenceModel) -> dict:
        return (model.metrics or {}).get("cross_validated") or {}


class KGSerializer(serializers.Serializer):
    kg = serializers.PrimaryKeyRelatedField(queryset=KnowledgeGraph.objects.all(), help_text="knowledge-graph id")


class OwnWeighingSerializer(serializers.Serializer):
    kg = serializers.IntegerField()
    wanted = serializers.BooleanField(help_text="weighed by the model for every KG, which was not fitted on its runs")
    structural_model = serializers.IntegerField(allow_null=True, help_text="whose calibration triples are verified")
    calibration_triples = serializers.IntegerField()
    evaluation = serializers.IntegerField(allow_null=True, help_text="their evidence-mode evaluation, once started")
    evaluation_status = serializers.CharField(allow_null=True)
    verified = serializers.CharField(allow_null=True, help_text="progress of an unfinished evaluation: 'k of n'")
    waiting_for_worker = serializers.BooleanField(help_text="handed to the worker, which drives another evaluation first")
    fitted = serializers.IntegerField(allow_null=True, help_text="the confidence model fitted on them, once fitted")
    refused = serializers.CharField(help_text="why they cannot be verified yet; empty when they can")


def _own_weighing_data(kg: KnowledgeGraph) -> dict:
    state = confidence_own.own_model_state(kg)
    if state is None:
        raise Conflict(f"{kg.name} is a SPARQL endpoint: it has no structural model to take calibration triples from")
    evaluation = state.evaluation
    return {"kg": kg.pk, "wanted": confidence_own.wanted(kg), "structural_model": state.structural.pk if state.structural else None,
            "calibration_triples": state.triples, "evaluation": evaluation.pk if evaluation else None,
            "evaluation_status": evaluation.status if evaluation else None,
            "verified": state.verified,
            "waiting_for_worker": bool(evaluation and evaluation.waiting_for_worker),
            "fitted": state.fitted.pk if state.fitted else None, "refused": state.refused}


def _kg_of(request: Request) -> KnowledgeGraph:
    form = KGSerializer(data=request.data)
    form.is_valid(raise_exception=True)
    return form.validated_data["kg"]


class ConfidenceModelViewSet(viewsets.ReadOnlyModelViewSet):
    """Verdict confidence models, newest first: the one in force for every KG, KGs' own, and candidates. Changing which
    is in force, and fitting one, needs the admin role, as on the confidence page."""

    queryset = ConfidenceModel.objects.select_related("kg").defer("fitted")
    serializer_class = ConfidenceModelSerializer
    write_role = ADMIN

    @extend_schema(parameters=[OpenApiParameter("kg", int, description="knowledge-graph id: its own models; none: the "
                                                                       "models for every KG"),
                               OpenApiParameter("active", str, enum=["true", "false"])])
    def list(self, request: Request, *args, **kwargs) -> Response:
        return super().list(request, *args, **kwargs)

    def get_queryset(self):
        models = super().get_queryset()
        params = self.request.query_params
        if value := single(params, "kg"):
            models = (models.filter(kg__isnull=True) if value == "none"
                      else models.filter(kg_id=parse_id(value, "kg", "a knowledge-graph id, or none")))
        if value := params.get("active"):
            if value not in ("true", "false"):
                raise exceptions.ValidationError({"active": ["true or false"]})
            models = models.filter(active=value == "true")
        return models

    @extend_schema(request=None, responses={200: ConfidenceModelSerializer})
    @action(detail=True, methods=["post"])
    def activate(self, request: Request, pk=None) -> Response:
        """Put the model in force for its KG (or for every KG, when the KGs' own stand down); the runs it weighs are
        re-weighed in the background."""
        model = self.get_object()
        confidence_reviews.put_in_force(model, actor=request.user)
        model.refresh_from_db()
        return Response(ConfidenceModelSerializer(model).data)

    @extend_schema(request=None, responses={200: ConfidenceModelSerializer})
    @action(detail=True, methods=["post"], url_path="stand-down")
    def stand_down(self, request: Request, pk=None) -> Response:
        """Take a KG's own model out of force: the model for every KG weighs its runs again (409 for a model not in force
        or the model for every KG)."""
        model = self.get_object()
        if not model.active or model.kg_id is None:
            raise Conflict(f"confidence model {model.pk} is not a KG's own model in force: nothing to stand down")
        confidence_reviews.stand_down(model, actor=request.user)
        model.refresh_from_db()
        return Response(ConfidenceModelSerializer(model).data)

    @extend_schema(request=KGSerializer, responses={201: ConfidenceModelSerializer})
    @action(detail=False, methods=["post"])
    def refit(self, request: Request) -> Response:
        """Fit a candidate on the KG's reviewed runs (not put in force); 400 with the reason when there are too few."""
        kg = _kg_of(request)
        try:
            model = confidence_reviews.refit_on_reviews(kg, actor=request.user)
        except ValueError as exc:
            raise exceptions.ValidationError({"kg": [str(exc)]}) from None
        return Response(ConfidenceModelSerializer(model).data, status=status.HTTP_201_CREATED)

    @extend_schema(parameters=[OpenApiParameter("kg", int, required=True, description="knowledge-graph id")],
                   responses={200: OwnWeighingSerializer})
    @action(detail=False, methods=["get"], url_path="own-weighing")
    def own_weighing_state(self, request: Request) -> Response:
        """Where a local KG stands on the way to a weighing of its own from its structural calibration triples."""
        kg = get_id(request.query_params, "kg", required=True, hint="a knowledge-graph id")
        return Response(_own_weighing_data(get_object_or_404(KnowledgeGraph, pk=kg)))

    @extend_schema(request=KGSerializer, responses={202: OwnWeighingSerializer})
    @action(detail=False, methods=["post"], url_path="own-weighing/verify")
    def verify_calibration_triples(self, request: Request) -> Response:
        """Hand the evidence-mode evaluation of the KG's calibration triples to the worker (drawn the first time, resumed
        after an interruption); 409 when it cannot be (no structural model yet, or it is running)."""
        kg = _kg_of(request)
        try:
            confidence_own.verify_calibration_triples(kg, actor=request.user)
        except ValueError as exc:
            raise Conflict(str(exc)) from None
        return Response(_own_weighing_data(kg), status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=KGSerializer, responses={201: ConfidenceModelSerializer})
    @action(detail=False, methods=["post"], url_path="own-weighing/fit")
    def fit_on_calibration_triples(self, request: Request) -> Response:
        """Fit a candidate on the finished evaluation of the KG's calibration triples (not put in force); 409 before
        they are verified."""
        kg = _kg_of(request)
        try:
            model = confidence_own.fit_on_calibration_triples(kg, actor=request.user)
        except ValueError as exc:
            raise Conflict(str(exc)) from None
        return Response(ConfidenceModelSerializer(model).data, status=status.HTTP_201_CREATED)
