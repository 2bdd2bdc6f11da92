"""Confidence models through the API: listed and filtered, put in force and stood down with the KG's runs re-weighed
by the real worker, and a KG's own weighing fitted on its calibration triples, verified by the real worker."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.verifier.api.error_shape import assert_error
from tests.workers import wait_for
from verifier import confidence
from verifier.models import AuditEvent, ConfidenceModel, Evaluation, Run


def _model(kg=None, *, active=True, source="fitted") -> ConfidenceModel:
    return ConfidenceModel.objects.create(kg=kg, features=["structural_logit"], coefficients=[1.0], intercept=0.0, active=active,
                                          source=source, metrics={"n": 40, "cross_validated": {"folds": 5, "ece": 0.03,
                                                                                              "combined_accuracy": 0.8}})


@pytest.mark.django_db
def test_models_are_listed_with_their_figures_and_filtered_by_kg_and_state(world_kg, client_as):
    every_kg, own, candidate = _model(), _model(world_kg, source="own"), _model(world_kg, active=False, source="candidate")
    client = client_as("viewer")

    def ids(query: str = "") -> list[int]:
        response = client.get(reverse("api:confidence-model-list") + query)
        assert response.status_code == 200, response.content[:300]
        return [row["id"] for row in response.json()["results"]]

    assert ids() == [candidate.pk, own.pk, every_kg.pk]  # newest first
    assert ids(f"?kg={world_kg.pk}") == [candidate.pk, own.pk] and ids("?kg=none") == [every_kg.pk]
    assert ids(f"?kg={world_kg.pk}&active=false") == [candidate.pk]
    row = client.get(reverse("api:confidence-model-detail", args=[own.pk])).json()
    assert (row["kg"], row["kg_name"], row["active"], row["n"]) == (world_kg.pk, world_kg.name, True, 40)
    assert row["cross_validated"]["combined_accuracy"] == 0.8 and "fitted" not in row
    assert client.get(reverse("api:confidence-model-detail", args=[every_kg.pk])).json()["kg_name"] is None
    for query, field in (("?kg=codex", "kg"), ("?active=yes", "active")):
        assert_error(client.get(reverse("api:confidence-model-list") + query), 400, "invalid")["details"][field]


@pytest.mark.django_db
def test_a_refit_or_a_stand_down_that_cannot_be_says_why(world_kg, client_as):
    every_kg = _model()
    admin = client_as("admin")
    error = assert_error(admin.post(reverse("api:confidence-model-refit"), {"kg": world_kg.pk}, format="json"), 400, "invalid")
    assert error["details"]["kg"] == ["A refit needs at least 20 reviewed runs of this KG; 0 so far."]
    assert_error(admin.post(reverse("api:confidence-model-refit"), {"kg": 999999}, format="json"), 400, "invalid")
    error = assert_error(admin.post(reverse("api:confidence-model-stand-down", args=[every_kg.pk])), 409)
    assert "not a KG's own model in force" in error["message"]
    assert ConfidenceModel.objects.count() == 1 and every_kg.active


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_kgs_own_weighing_is_verified_by_the_worker_fitted_put_in_force_and_stood_down(weighed_by_every_kg, client_as,
                                                                                         celery_worker_process):
    kg, structural, shipped = weighed_by_every_kg
    admin = client_as("admin")
    state_url = reverse("api:confidence-model-own-weighing-state") + f"?kg={kg.pk}"
    state = admin.get(state_url).json()
    assert state["wanted"] and state["structural_model"] == structural.pk and state["evaluation"] is None
    triples = state["calibration_triples"]
    assert triples >= 20 and state["refused"] == ""
    error = assert_error(admin.post(reverse("api:confidence-model-fit-on-calibration-triples"), {"kg": kg.pk}, format="json"), 409)
    assert error["message"] == "its calibration triples are not verified yet"

    handed = admin.post(reverse("api:confidence-model-verify-calibration-triples"), {"kg": kg.pk}, format="json")
    assert handed.status_code == 202, handed.content[:500]
    evaluation = Evaluation.objects.get(pk=handed.json()["evaluation"])
    assert evaluation.mode == "evidence" and evaluation.sample_size == triples
    wait_for(lambda: admin.get(state_url).json()["evaluation_status"] == "finished",
             what="the worker verifying the calibration triples", timeout=300)

    fitted = admin.post(reverse("api:confidence-model-fit-on-calibration-triples"), {"kg": kg.pk}, format="json")
    assert fitted.status_code == 201, fitted.content[:500]
    candidate = fitted.json()
    assert (candidate["kg"], candidate["active"], candidate["n"]) == (kg.pk, False, triples)
    assert candidate["source"] == f"evaluation {evaluation.name}" and admin.get(state_url).json()["fitted"] == candidate["id"]

    in_force = admin.post(reverse("api:confidence-model-activate", args=[candidate["id"]]))
    assert in_force.status_code == 200 and in_force.json()["active"]
    assert confidence.active_model(kg.pk).pk == candidate["id"] and confidence.active_model(None) == shipped
    assert not admin.get(state_url).json()["wanted"]
    runs = [item.run_id for item in evaluation.items.all()]

    def weighed_by(pk: int) -> bool:
        return all(run.assessment.get("confidence_model") == pk for run in Run.objects.filter(pk__in=runs))

    wait_for(lambda: weighed_by(candidate["id"]), what="the worker re-weighing the KG's runs with its own model")
    stood_down = admin.post(reverse("api:confidence-model-stand-down", args=[candidate["id"]]))
    assert stood_down.status_code == 200 and not stood_down.json()["active"] and confidence.active_model(kg.pk) == shipped
    wait_for(lambda: weighed_by(shipped.pk), what="the worker re-weighing the KG's runs with the model for every KG")
    assert [e.action for e in AuditEvent.objects.filter(object_type="verifier.confidencemodel").order_by("pk")] == [
        "confidence.fit", "confidence.activate", "confidence.stand_down"]
