"""The knowledge graphs through the API: the ids imports and claims name, with the structural model's state and the
confidence model that weighs each KG's verdicts."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.verifier.api.error_shape import assert_error
from tests.verifier.web.structure_rows import failed, ready, training
from verifier.models import ConfidenceModel, Entity, KnowledgeGraph, Passage, Relation, StructuralModel, Triple

pytestmark = pytest.mark.django_db


def test_the_kgs_are_listed_with_their_structural_and_confidence_models(world_kg, client_as):
    endpoint = KnowledgeGraph.objects.create(name="wikidata", kind=KnowledgeGraph.Kind.SPARQL,
                                             endpoint_url="https://query.wikidata.org/sparql")
    every_kg = ConfidenceModel.objects.create(features=["structural_logit"], coefficients=[1.0], intercept=0.0, source="shipped")
    model = training(world_kg)
    client = client_as("viewer")
    rows = {row["name"]: row for row in client.get(reverse("api:kg-list")).json()["results"]}
    assert set(rows) == {world_kg.name, "wikidata"}
    world = rows[world_kg.name]
    assert (world["id"], world["kind"], world["version"]) == (world_kg.pk, "local", world_kg.version)
    assert world["structural_model"]["state"] == "training" and world["structural_model"]["model_id"] == model.pk
    assert "training (45%)" in world["structural_model"]["text"]
    assert world["confidence_model"] == {"id": every_kg.pk, "own": False}
    assert rows["wikidata"]["structural_model"] is None and rows["wikidata"]["endpoint_url"] == endpoint.endpoint_url
    assert "counts" not in world

    own = ConfidenceModel.objects.create(kg=world_kg, features=["structural_logit"], coefficients=[1.0], intercept=0.0)
    ready(world_kg)
    detail = client.get(reverse("api:kg-detail", args=[world_kg.pk])).json()
    assert detail["confidence_model"] == {"id": own.pk, "own": True} and detail["structural_model"]["state"] == "ready"
    assert detail["counts"] == {"entities": Entity.objects.filter(kg=world_kg).count(),
                                "relations": Relation.objects.filter(kg=world_kg).count(),
                                "triples": Triple.objects.filter(kg=world_kg).count(),
                                "passages": Passage.objects.filter(kg=world_kg).count()}
    assert detail["counts"]["triples"] > 0 and detail["counts"]["passages"] > 0


def test_an_admin_trains_a_failed_model_again_and_a_second_request_is_refused(world_kg, client_as):
    failed(world_kg)
    admin = client_as("admin")
    url = reverse("api:kg-train", args=[world_kg.pk])
    assert_error(client_as("curator").post(url), 403, "permission_denied")
    response = admin.post(url)
    assert response.status_code == 202, response.content[:300]
    queued = response.json()["structural_model"]
    assert queued["state"] == "queued" and StructuralModel.objects.get(pk=queued["model_id"]).status == StructuralModel.Status.QUEUED
    error = assert_error(admin.post(url), 409)
    assert f"the structural model of {world_kg.name} is waiting for a training worker" in error["message"]
    endpoint = KnowledgeGraph.objects.create(name="wikidata", kind=KnowledgeGraph.Kind.SPARQL)
    error = assert_error(admin.post(reverse("api:kg-train", args=[endpoint.pk])), 409)
    assert error["message"] == "wikidata is a SPARQL endpoint: it has no structural model"
