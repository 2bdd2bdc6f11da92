"""``/api/kgs/``: the knowledge graphs an installation holds — the ids every import, claim and filter names — with their
structural model's state (as the workbench's strip shows it) and the confidence model that weighs their verdicts."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from verifier import confidence, services
from verifier.api.errors import Conflict
from verifier.models import Entity, KnowledgeGraph, Passage, Relation, Triple
from verifier.roles import ADMIN
from verifier.selectors import structural_statuses


class KnowledgeGraphSerializer(serializers.ModelSerializer):
    structural_model = serializers.SerializerMethodField(
        help_text="local KGs: state (none, queued, training, ready, failed, stalled), text, progress, model_id, "
                  "ready_model_id, mrr; null for a SPARQL endpoint or a KG with no triples yet")
    confidence_model = serializers.SerializerMethodField(
        help_text="the confidence model weighing its verdicts: id and whether it is the KG's own (else the one for every "
                  "KG); null when none is in force")

    class Meta:
        model = KnowledgeGraph
        fields = ["id", "name", "title", "kind", "endpoint_url", "description", "version", "loaded_at", "structural_model",
                  "confidence_model"]
        read_only_fields = fields

    def get_structural_model(self, kg: KnowledgeGraph) -> dict | None:
        status = self.context.get("structural", {}).get(kg.pk)
        return status.as_dict() if status else None

    def get_confidence_model(self, kg: KnowledgeGraph) -> dict | None:
        model = confidence.active_model(kg.pk)
        return {"id": model.pk, "own": model.kg_id == kg.pk} if model else None


class KnowledgeGraphDetailSerializer(KnowledgeGraphSerializer):
    counts = serializers.SerializerMethodField(help_text="entities, relations, triples and passages it holds")

    class Meta(KnowledgeGraphSerializer.Meta):
        fields = [*KnowledgeGraphSerializer.Meta.fields, "counts"]
        read_only_fields = fields

    def get_counts(self, kg: KnowledgeGraph) -> dict:
        return {"entities": Entity.objects.filter(kg=kg).count(), "relations": Relation.objects.filter(kg=kg).count(),
                "triples": Triple.objects.filter(kg=kg).count(), "passages": Passage.objects.filter(kg=kg).count()}


class KnowledgeGraphViewSet(viewsets.ReadOnlyModelViewSet):
    """The knowledge graphs, by name (loaded with ``manage.py load_kg``). Training a KG's structural model again needs
    the admin role, as on the workbench."""

    queryset = KnowledgeGraph.objects.order_by("name")
    write_role = ADMIN

    def get_serializer_class(self):
        return KnowledgeGraphSerializer if self.action == "list" else KnowledgeGraphDetailSerializer

    def get_serializer_context(self) -> dict:
        context = super().get_serializer_context()
        context["structural"] = {line.kg_id: line for line in structural_statuses()}  # two queries, not two per KG
        return context

    @extend_schema(request=None, responses={202: KnowledgeGraphDetailSerializer})
    @action(detail=True, methods=["post"])
    def train(self, request: Request, pk=None) -> Response:
        """Queue a training of the KG's structural model where none serves it (it failed, stalled or was never
        trained) → 202 with the KG, its model queued; 409 otherwise (a SPARQL endpoint, a training under way, a
        ready model: ``manage.py train_kge`` retrains one)."""
        kg = self.get_object()
        try:
            services.train_structural_model(kg=kg, actor=request.user)
        except ValueError as exc:
            raise Conflict(str(exc)) from None
        return Response(KnowledgeGraphDetailSerializer(kg, context=self.get_serializer_context()).data,
                        status=status.HTTP_202_ACCEPTED)
