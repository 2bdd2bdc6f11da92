"""The knowledge graph: its source, entities, relations, types, triples and entity passages."""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex, OpClass
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from django.db.models import F
from django.db.models.functions import Lower
from pgvector.django import HnswIndex, VectorField

EMBEDDING_DIMENSIONS = 384  # all-MiniLM-L6-v2


class KnowledgeGraph(models.Model):
    """A named source of triples: the local Postgres store or a remote SPARQL endpoint."""

    class Kind(models.TextChoices):
        LOCAL = "local", "Local store"
        SPARQL = "sparql", "SPARQL endpoint"

    name = models.SlugField(max_length=100, unique=True)
    title = models.CharField(max_length=200, blank=True)
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.LOCAL)
    endpoint_url = models.URLField(blank=True, help_text="SPARQL endpoint, for kind=sparql")
    description = models.TextField(blank=True)
    # Bumped by every import; tool results are cached per (KG, version).
    version = models.PositiveIntegerField(default=0)
    loaded_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # Other loaded KGs its triples are checked against, their entities matched by Wikidata id
    # (verifier/structure/reference.py); the structural calibration weighs what they say.
    references = models.ManyToManyField("self", symmetrical=False, blank=True, related_name="referenced_by")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class EntityType(models.Model):
    """A class entities belong to (a Wikidata class for CoDEx-S, a derived one elsewhere)."""

    kg = models.ForeignKey(KnowledgeGraph, on_delete=models.CASCADE, related_name="types")
    external_id = models.CharField(max_length=255)
    label = models.CharField(max_length=500, blank=True)
    description = models.TextField(blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["kg", "external_id"], name="entitytype_unique_per_kg")]

    def __str__(self) -> str:
        return self.label or self.external_id


class Entity(models.Model):
    kg = models.ForeignKey(KnowledgeGraph, on_delete=models.CASCADE, related_name="entities")
    external_id = models.CharField(max_length=255, help_text="Q42, /m/02mjmr, or an IRI")
    label = models.CharField(max_length=500, blank=True)
    description = models.TextField(blank=True)
    aliases = ArrayField(models.CharField(max_length=500), default=list, blank=True)
    types = ArrayField(models.CharField(max_length=255), default=list, blank=True, help_text="EntityType ids")
    # Number of triples the entity takes part in, kept by the loader: path search prunes hubs by it.
    degree = models.PositiveIntegerField(default=0, db_default=0)
    # The Wikidata id of the same thing where the KG's own id is another one (a Freebase mid): what
    # matches it with the entities of a reference KG. An id that is a Wikidata id needs none.
    same_as = models.CharField(max_length=32, blank=True, default="", db_default="")
    # Embedding of "label, description" (kept by the audit, reset by the loader when either changes): whether a
    # triple's two ends are about related things (verifier/kg_audit/names.py).
    embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS, null=True, blank=True)

    class Meta:
        verbose_name_plural = "entities"
        constraints = [models.UniqueConstraint(fields=["kg", "external_id"], name="entity_unique_per_kg")]
        indexes = [
            # Name resolution: case-insensitive exact label, then trigram similarity on the label.
            models.Index(F("kg"), Lower("label"), name="entity_label_lower_idx"),
            GinIndex(OpClass(Lower("label"), name="gin_trgm_ops"), name="entity_label_trgm"),
            GinIndex(fields=["aliases"], name="entity_aliases_gin"),
            GinIndex(fields=["types"], name="entity_types_gin"),
        ]

    def __str__(self) -> str:
        return f"{self.label} ({self.external_id})" if self.label else self.external_id


class Relation(models.Model):
    kg = models.ForeignKey(KnowledgeGraph, on_delete=models.CASCADE, related_name="relations")
    external_id = models.CharField(max_length=255, help_text="P27, /people/person/nationality, or an IRI")
    label = models.CharField(max_length=500, blank=True)
    description = models.TextField(blank=True)
    aliases = ArrayField(models.CharField(max_length=500), default=list, blank=True)
    # Subject / object constraints as EntityType ids; `schema_source` says whether they are declared by
    # the source or derived from the observed heads and tails.
    domain = ArrayField(models.CharField(max_length=255), default=list, blank=True)
    range = ArrayField(models.CharField(max_length=255), default=list, blank=True)
    schema_source = models.CharField(max_length=20, blank=True)
    # Embedding of the label, used to rank neighbour relations against a query relation.
    embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS, null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["kg", "external_id"], name="relation_unique_per_kg")]

    def __str__(self) -> str:
        return f"{self.label} ({self.external_id})" if self.label else self.external_id


class Triple(models.Model):
    """An edge of the local store. Written only by the bulk loader, which resolves every id by a join
    inside its transaction; per-row foreign-key triggers and single-column FK indexes would cost more
    than the whole load while guarding nothing, so the composite indexes below are the only ones."""

    kg = models.ForeignKey(
        KnowledgeGraph, on_delete=models.CASCADE, related_name="triples", db_constraint=False, db_index=False
    )
    head = models.ForeignKey(Entity, on_delete=models.CASCADE, related_name="+", db_constraint=False, db_index=False)
    relation = models.ForeignKey(
        Relation, on_delete=models.CASCADE, related_name="+", db_constraint=False, db_index=False
    )
    tail = models.ForeignKey(Entity, on_delete=models.CASCADE, related_name="+", db_constraint=False, db_index=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["head", "relation", "tail"], name="triple_unique"),
        ]
        indexes = [
            # Unique (head, relation, tail) serves head and head+relation lookups; (kg, relation) serves
            # per-KG counts and deletes.
            # Covering (head included): incoming edges are read from the index alone, no heap visits.
            models.Index(fields=["tail", "relation"], include=["head"], name="triple_tail_relation_idx"),
            models.Index(fields=["kg", "relation"], name="triple_kg_relation_idx"),
        ]

    def __str__(self) -> str:
        return f"({self.head_id}, {self.relation_id}, {self.tail_id})"


class Passage(models.Model):
    """Text about an entity (a Wikipedia extract for CoDEx-S): what Wiki_Evidence searches."""

    kg = models.ForeignKey(KnowledgeGraph, on_delete=models.CASCADE, related_name="passages")
    entity = models.ForeignKey(Entity, on_delete=models.CASCADE, related_name="passages")
    source = models.CharField(max_length=100, default="wikipedia")
    url = models.URLField(max_length=1000, blank=True)
    text = models.TextField()
    search_vector = models.GeneratedField(
        expression=SearchVector("text", config="english"),
        output_field=SearchVectorField(),
        db_persist=True,
    )
    embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS, null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["entity", "source"], name="passage_unique_per_source")]
        indexes = [
            GinIndex(fields=["search_vector"], name="passage_search_gin"),
            HnswIndex(
                name="passage_embedding_hnsw",
                fields=["embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
        ]

    def __str__(self) -> str:
        return f"{self.source} passage for {self.entity_id}"
