"""The confidence page: the model in force per KG, its verdicts against reviewers' decisions, and (admins) a model
fitted on those decisions or on the KG's verified structural calibration triples, put in force with the KG's runs
re-weighed by the real worker."""

from __future__ import annotations

import itertools
import random
import re

import pytest
from django.urls import reverse

from tests.verifier.web.workbench import client_for, fast_password_hashing, signed_in  # noqa: F401  (autouse fixture)
from tests.workers import wait_for
from verifier import confidence, confidence_fitting
from verifier.agent.weighing import FEATURES
from verifier.models import AuditEvent, ConfidenceModel, Evaluation, Review, Run, SupportItem, VerificationTask


def across_kgs_model() -> ConfidenceModel:
    """The model for every KG in force, as the shipped one is: the verdict follows the structural probability."""
    coefficients = [1.0 if name == "structural_logit" else 0.0 for name in FEATURES]
    return ConfidenceModel.objects.create(features=FEATURES, coefficients=coefficients, intercept=0.0, source="shipped",
                                          metrics={"n": 1000, "cross_validated": {"folds": 5, "combined_accuracy": 0.832,
                                                                                  "ece": 0.021, "structural_accuracy": 0.82}})


def reviewed_runs(kg, reviewer, n: int = 40) -> list[tuple[Run, bool]]:
    """``n`` finished runs, half of them weighed evidence-only runs: each verdict follows a noisy structural
    probability, and the reviewer settles each triple as it truly is (accepting or overriding the verdict)."""
    rng = random.Random(1)
    entities, relations = list(kg.entities.all()), list(kg.relations.all())
    triples = [(h, r, t) for h, r, t in itertools.product(entities, relations, entities) if h != t][:n]
    made = []
    for position, (head, relation, tail) in enumerate(triples):
        label = position % 2 == 0
        probability = min(0.99, max(0.01, (0.72 if label else 0.32) + rng.uniform(-0.3, 0.3)))
        verdict = "correct" if probability >= 0.5 else "incorrect"
        task = VerificationTask.objects.create(kg=kg, head=head, relation=relation, tail=tail)
        run = Run.objects.create(task=task, status=Run.Status.SUCCEEDED, verdict=verdict,
                                 confidence=probability if verdict == "correct" else 1 - probability,
                                 config={"mode": "evidence"} if position % 4 < 2 else {"profile": "compact"},
                                 assessment={"agent_verdict": verdict if position % 4 >= 2 else ""})
        SupportItem.objects.create(run=run, key="E1", kind=SupportItem.Kind.PLAUSIBILITY, text="plausibility",
                                   payload={"probability": probability, "model": None})
        truth = "correct" if label else "incorrect"
        Review.objects.create(run=run, reviewer=reviewer, verdict=truth,
                              decision=Review.Decision.ACCEPT if truth == verdict else Review.Decision.OVERRIDE)
        made.append((run, label))
    return made


@pytest.fixture
def reviewed(world_kg, make_user):
    model = across_kgs_model()
    runs = reviewed_runs(world_kg, make_user("reviewer", "rita"))
    return world_kg, model, runs


def test_reviews_of_evidence_only_runs_label_them_for_a_refit(reviewed):
    kg, _, runs = reviewed
    labelled = confidence_fitting.labelled_runs(reviews=True, kg=kg)
    assert len(labelled) == 40
    assert sum(run.config.get("mode") == "evidence" for run, _ in labelled) == 20


@pytest.mark.django_db
def test_the_page_shows_the_model_in_force_and_how_its_verdicts_fared_with_the_reviewers(reviewed, make_user):
    kg, model, runs = reviewed
    kept = sum(run.verdict == ("correct" if label else "incorrect") for run, label in runs)
    client = client_for(make_user, "viewer")
    page = client.get(reverse("confidence")).content.decode()
    section = page.split(f'id="kg-{kg.pk}"')[1]
    assert f"Confidence model <strong>#{model.pk}</strong> (for every KG without a model of its own)" in section
    assert ("right <strong>83.2%</strong> of the time at ECE\n    0.021; the structural probability alone 82.0% on the\n"
            "    same runs.") in section
    assert f"Reviewers decided Correct or Incorrect on <strong>40</strong>\n    runs of this KG and kept the verdict of {kept}:" in section
    bins = re.search(rf'id="kg-{kg.pk}-reliability-bins">(.*?)</table>', section, re.S).group(1)
    assert sum(int(n) for n in re.findall(r'<td class="num">(\d+)</td><td class="num">0\.\d+</td>', bins)) == 40
    assert "Fit a model on" not in section and "None yet: an admin fits one" in section  # a viewer cannot refit
    assert "One can be fitted before anything is reviewed, on its structural calibration triples" in section
    assert "manage.py" not in section  # command lines are for administrators
    admin = client_for(make_user, "admin").get(reverse("confidence")).content.decode().split(f'id="kg-{kg.pk}"')[1]
    assert f"<code>manage.py calibrate --kg {kg.name} --calibration-triples</code>" in admin
    assert "Its structural model is not trained yet: its calibration triples come from that training." in section
    # every run was weighed with no model recorded: none is this model's yet
    assert "40 finished runs of this KG\n    were weighed by another confidence model" in section
    chart = client.get(reverse("confidence-reliability", args=[kg.pk]))
    assert chart.status_code == 200 and chart["Content-Type"] == "image/svg+xml" and b"<svg" in chart.content


@pytest.mark.django_db
def test_a_kg_with_too_few_reviews_says_how_many_a_refit_needs(world_kg, make_user):
    across_kgs_model()
    reviewed_runs(world_kg, make_user("reviewer"), n=12)
    admin = client_for(make_user, "admin")
    section = admin.get(reverse("confidence")).content.decode().split(f'id="kg-{world_kg.pk}"')[1]
    assert "A refit needs at least 20 reviewed runs of this KG; 12 so far." in section
    response = admin.post(reverse("confidence-refit", args=[world_kg.pk]))
    page = admin.get(response["Location"]).content.decode()
    assert "No model fitted: A refit needs at least 20 reviewed runs of this KG; 12 so far." in page
    assert ConfidenceModel.objects.count() == 1


@pytest.mark.django_db
def test_an_admin_fits_a_candidate_on_the_reviews_which_leaves_the_model_in_force(reviewed, make_user):
    kg, model, runs = reviewed
    admin = make_user("admin", "ada")
    client = signed_in(admin)
    assert client_for(make_user, "reviewer").post(reverse("confidence-refit", args=[kg.pk])).status_code == 403
    response = client.post(reverse("confidence-refit", args=[kg.pk]))
    assert response["Location"] == reverse("confidence") + f"#kg-{kg.pk}"
    candidate = ConfidenceModel.objects.get(kg=kg)
    assert not candidate.active and confidence.active_model(kg.pk) == model
    assert candidate.metrics["n"] == 40 and candidate.source == f"40 reviewed runs of {kg.name}"
    cv = candidate.metrics["cross_validated"]
    page = client.get(response["Location"]).content.decode()
    assert (f"Confidence model #{candidate.pk} fitted on 40 reviewed runs of {kg.name}; not in force yet. Out of fold its "
            f"weighing agrees with the reviewers {cv['combined_accuracy']:.1%}") in page
    row = re.search(rf'<tr data-model="{candidate.pk}">(.*?)</tr>', page, re.S).group(1)
    assert f'<td class="num">{cv["combined_accuracy"] * 100:.1f}</td>' in row and "Put in force" in row
    # beside it, the model in force weighing the same runs: here the structural probability's side of 0.5
    kept = sum((confidence.stored_evidence(run).structural_probability >= 0.5) == label for run, label in runs) / len(runs)
    assert cv["in_force_model"] == model.pk and cv["in_force_accuracy"] == pytest.approx(kept, abs=1e-4)
    assert f'<td class="num">{kept * 100:.1f} (#{model.pk}, ECE {cv["in_force_ece"]:.3f})</td>' in row
    event = AuditEvent.objects.get(action="confidence.fit")
    assert event.actor == admin and event.object_id == str(candidate.pk) and event.after["n"] == 40


@pytest.mark.django_db(transaction=True)
def test_putting_a_candidate_in_force_reweighs_the_kgs_runs_and_standing_it_down_goes_back(reviewed, make_user,
                                                                                          celery_worker_process):
    kg, model, runs = reviewed
    admin = signed_in(make_user("admin"))
    admin.post(reverse("confidence-refit", args=[kg.pk]))
    candidate = ConfidenceModel.objects.get(kg=kg)
    response = admin.post(reverse("confidence-activate", args=[candidate.pk]))
    assert f"Confidence model #{candidate.pk} is in force for {kg.name}" in admin.get(response["Location"]).content.decode()
    assert confidence.active_model(kg.pk) == candidate and confidence.active_model(None) == model

    def weighed_by(pk):
        return Run.objects.filter(pk__in=[run.pk for run, _ in runs], assessment__confidence_model=pk).count() == len(runs)

    wait_for(lambda: weighed_by(candidate.pk), what="the worker re-weighing the KG's runs with the candidate")
    page = admin.get(reverse("confidence")).content.decode().split(f'id="kg-{kg.pk}"')[1]
    assert f"Confidence model <strong>#{candidate.pk}</strong> (for {kg.name})" in page and "weighed by another" not in page
    assert "--calibration-triples" not in page  # it has a model of its own
    admin.post(reverse("confidence-stand-down", args=[candidate.pk]))
    assert confidence.active_model(kg.pk) == model
    wait_for(lambda: weighed_by(model.pk), what="the worker re-weighing the KG's runs with the model for every KG")
    assert [e.action for e in AuditEvent.objects.filter(object_type="verifier.confidencemodel").order_by("pk")] == [
        "confidence.fit", "confidence.activate", "confidence.stand_down"]


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_an_admin_has_the_worker_verify_the_calibration_triples_and_fits_the_kgs_own_weighing_on_them(
        make_user, celery_worker_process, weighed_by_every_kg):
    """A KG weighed by the model for every KG: its structural calibration triples are verified by the worker in the
    evidence mode, a candidate is fitted on those runs, and put in force."""
    from verifier.structure.fitting import calibration_triples

    kg, _, shipped = weighed_by_every_kg
    triples = calibration_triples(kg)
    admin, viewer = signed_in(make_user("admin", "ada")), client_for(make_user, "viewer")

    def section(client) -> str:
        return client.get(reverse("confidence")).content.decode().split(f'id="kg-{kg.pk}"')[1].split("</section>")[0]

    assert f"Verify its {len(triples)} calibration triples" in section(admin)
    assert "Not started: an admin starts it here." in section(viewer) and "<button" not in section(viewer)
    assert viewer.post(reverse("confidence-verify-calibration", args=[kg.pk])).status_code == 403
    response = admin.post(reverse("confidence-verify-calibration", args=[kg.pk]))
    assert response["Location"] == reverse("confidence") + f"#kg-{kg.pk}"
    evaluation = Evaluation.objects.get(kg=kg)
    assert (f"The worker verifies the {len(triples)} calibration triples of {kg.name} in the evidence mode (evaluation "
            f"{evaluation.name})") in admin.get(response["Location"]).content.decode()
    assert evaluation.mode == "evidence" and evaluation.sample_size == len(triples)
    wait_for(lambda: Evaluation.objects.get(pk=evaluation.pk).status == Evaluation.Status.FINISHED,
             what="the worker verifying the calibration triples", timeout=300)
    verified = sorted((i.task.head_id, i.task.relation_id, i.task.tail_id, i.expected_label)
                      for i in evaluation.items.select_related("task"))
    assert verified == sorted(triples)
    page = section(admin)
    assert f"Its {len(triples)} calibration triples are verified" in page
    assert f"Fit a model on its {len(triples)} verified calibration triples" in page
    again = admin.post(reverse("confidence-verify-calibration", args=[kg.pk]))  # a second click: nothing is verified twice
    assert f"calibration triples of {kg.name} are verified already" in admin.get(again["Location"]).content.decode()
    assert Evaluation.objects.filter(kg=kg).count() == 1

    response = admin.post(reverse("confidence-fit-calibration", args=[kg.pk]))
    candidate = ConfidenceModel.objects.get(kg=kg, source=f"evaluation {evaluation.name}")
    assert not candidate.active and confidence.active_model(kg.pk) == shipped  # a candidate, not in force
    assert candidate.metrics["n"] == len(triples) and candidate.source == f"evaluation {evaluation.name}"
    assert candidate.coefficients[FEATURES.index("structural_logit")] > 0
    assert (f"Confidence model #{candidate.pk} fitted on {len(triples)} verified calibration triples of {kg.name}; not in "
            f"force yet. Out of fold its weighing is right") in admin.get(response["Location"]).content.decode()
    page = section(admin)
    assert f"Confidence model <strong>#{candidate.pk}</strong> was fitted on its" in page and "among the candidates" in page
    assert "Put in force" in re.search(rf'<tr data-model="{candidate.pk}">(.*?)</tr>', page, re.S).group(1)
    assert AuditEvent.objects.get(action="confidence.fit").after["evaluation"] == evaluation.name

    admin.post(reverse("confidence-activate", args=[candidate.pk]))
    assert confidence.active_model(kg.pk) == candidate and ConfidenceModel.objects.get(pk=shipped.pk).active
    assert "A weighing of its own" not in section(admin)  # it has one now


@pytest.mark.django_db
def test_the_calibration_triples_cannot_be_fitted_on_before_they_are_verified(world_kg, make_user):
    across_kgs_model()
    admin = client_for(make_user, "admin")
    response = admin.post(reverse("confidence-fit-calibration", args=[world_kg.pk]))
    assert "No model fitted: its calibration triples are not verified yet" in admin.get(response["Location"]).content.decode()
    response = admin.post(reverse("confidence-verify-calibration", args=[world_kg.pk]))
    assert ("Its calibration triples are not verified: Its structural model is not trained yet"
            in admin.get(response["Location"]).content.decode())
    assert not Evaluation.objects.exists() and ConfidenceModel.objects.count() == 1


@pytest.mark.django_db
def test_a_kg_the_model_for_every_kg_was_fitted_on_is_not_offered_a_weighing_of_its_own(world_kg, make_user):
    model = across_kgs_model()
    model.fitted = {f"{world_kg.name}\tQ42\tP27\tQ145": [0, True], "elsewhere\tQ1\tP1\tQ2": [1, False]}
    model.save()
    section = client_for(make_user, "admin").get(reverse("confidence")).content.decode().split(f'id="kg-{world_kg.pk}"')[1]
    assert "A weighing of its own" not in section and "--calibration-triples" not in section
    model.fitted = {"elsewhere\tQ1\tP1\tQ2": [1, False]}
    model.save()
    section = client_for(make_user, "viewer").get(reverse("confidence")).content.decode().split(f'id="kg-{world_kg.pk}"')[1]
    assert "A weighing of its own" in section
