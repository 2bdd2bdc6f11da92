"""``/api/kgs/``: the knowledge graphs an installation holds — the ids every import, claim and filter names — with their
structural model's state (as the workbench's strip shows it) and the confidence model that weighs their verdicts."""

from __future__ import annotations

from rest_framework import serializers, viewsets

from verifier import confidence
from verifier.models import Entity, KnowledgeGraph, Passage, Relation, Triple
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
    """The knowledge graphs, by name (loaded with ``manage.py load_kg``)."""

    queryset = KnowledgeGraph.objects.order_by("name")

    def get_serializer_class(self):
        return KnowledgeGraphSerializer if self.action == "list" else KnowledgeGraphDetailSerializer

    def get_serializer_context(self) -> dict:
        context = super().get_serializer_context()
        if self.action in ("list", "retrieve"):  # two queries for every KG on the page, not two per KG
            context["structural"] = {status.kg_id: status for status in structural_statuses()}
        return context
