"""``manage.py calibrate``: fitting the verdict confidence on an evaluation's labelled runs, recording their
triples as fitted, re-assessing finished runs, and moving a fitted model between installations."""

import io
import itertools
import json
import random

import pytest
from django.core.management import CommandError, call_command

from verifier import confidence, confidence_fitting
from verifier.agent.weighing import FEATURES, Evidence
from verifier.benchmarks.datasets import fitted_triples
from verifier.models import ConfidenceModel, Evaluation, EvaluationItem, FitTriple, Review, Run, SupportItem, VerificationTask

pytestmark = pytest.mark.django_db


@pytest.fixture
def labelled(world_kg):
    """40 finished agent runs of an evaluation: true triples score high on the structural model, false ones
    low (with noise); the model answered Correct to all of them, as a small model does."""
    rng = random.Random(0)
    evaluation = Evaluation.objects.create(name="fit-runs", kg=world_kg, benchmark="codex-s", sample_size=40, mode="agent")
    entities, relations = list(world_kg.entities.all()), list(world_kg.relations.all())
    triples = [(h, r, t) for h, r, t in itertools.product(entities, relations, entities) if h != t][:40]
    for position, (head, relation, tail) in enumerate(triples):
        label = position % 2 == 0
        task = VerificationTask.objects.create(kg=world_kg, head=head, relation=relation, tail=tail)
        run = Run.objects.create(task=task, status=Run.Status.SUCCEEDED, verdict="correct", config={"profile": "compact"},
                                 assessment={"agent_verdict": "correct", "agent_logit": 2.0})
        probability = min(0.99, max(0.01, (0.75 if label else 0.3) + rng.uniform(-0.2, 0.2)))
        SupportItem.objects.create(run=run, key="E1", kind=SupportItem.Kind.PLAUSIBILITY, text="plausibility",
                                   payload={"probability": probability, "model": None})
        EvaluationItem.objects.create(evaluation=evaluation, task=task, expected_label=label, position=position, run=run)
    return evaluation


def test_calibrate_fits_on_the_labelled_runs_records_them_and_reassesses(labelled, capsys):
    call_command("calibrate", evaluations="fit-runs")
    model = ConfidenceModel.objects.get(active=True)
    assert model.metrics["n"] == 40 and model.metrics["positives"] == 20
    assert model.coefficients[confidence.FEATURES.index("structural_logit")] > 0  # the signal that separates them
    assert FitTriple.objects.filter(purpose=FitTriple.Purpose.CONFIDENCE).count() == 40
    out = capsys.readouterr().out
    assert "fitted on 40 labelled runs" in out and "Re-assessed 40 finished weighed runs" in out
    true_run = EvaluationItem.objects.filter(evaluation=labelled, expected_label=True).first().run
    false_run = EvaluationItem.objects.filter(evaluation=labelled, expected_label=False).first().run
    true_run.refresh_from_db(), false_run.refresh_from_db()
    assert true_run.assessment["p_true"] > 0.5 > false_run.assessment["p_true"]
    assert true_run.confidence == pytest.approx(true_run.assessment["p_true"], abs=1e-4)  # verdict Correct


def test_a_weighing_no_better_than_the_plausibility_alone_says_so_and_names_the_model_to_put_back(labelled, capsys):
    """Every true triple's structural probability is above 0.5 and every false one's below: no weighing can
    beat it, and the command says so with the model that was in force."""
    call_command("calibrate", evaluations="fit-runs", no_reassess=True)
    first = ConfidenceModel.objects.get(active=True)
    capsys.readouterr()
    call_command("calibrate", evaluations="fit-runs", no_reassess=True)
    cross_validated = ConfidenceModel.objects.get(active=True).metrics["cross_validated"]
    assert cross_validated["structural_runs"] == 40 and cross_validated["structural_accuracy"] == 1.0
    out = capsys.readouterr().out
    assert "On its 40 runs with a structural probability, that probability alone is right 100.0% of the time" in out
    assert "the weighing adds nothing to it on these runs" in out
    assert f"put back with --activate {first.pk}." in out


def test_a_fitted_triple_is_weighed_by_the_weights_fitted_without_it(labelled):
    call_command("calibrate", evaluations="fit-runs", no_reassess=True)
    model = ConfidenceModel.objects.get(active=True)
    assert len(model.folds) == 5 and len(model.fitted) == 40
    fitted = FitTriple.objects.filter(purpose=FitTriple.Purpose.CONFIDENCE)
    assert fitted.count() == 40 and not fitted.filter(fold__isnull=True).exists()
    assert not fitted_triples(labelled.kg)  # weighed out of fold, so an evaluation may draw them
    run = EvaluationItem.objects.filter(evaluation=labelled).first().run
    key = confidence.fit_key(run.task)
    fold = model.fitted[key][0]
    own, everyone = confidence.weights_of(model, key), confidence.weights_of(model)
    assert own.coefficients == tuple(model.folds[fold]["coefficients"]) and own.coefficients != everyone.coefficients
    other = VerificationTask.objects.exclude(pk__in=EvaluationItem.objects.values("task")).first() or VerificationTask.objects.create(
        kg=labelled.kg, head=run.task.tail, relation=run.task.relation, tail=run.task.head)
    assert confidence.weights_of(model, confidence.fit_key(other)).coefficients == everyone.coefficients
    confidence.reassess(Run.objects.filter(pk=run.pk))
    run.refresh_from_db()
    assert run.assessment["p_true"] == pytest.approx(own.probability(confidence.stored_evidence(run)), abs=1e-4)
    assert run.assessment["confidence_fold"] == fold and own.fold == fold and everyone.fold is None


def test_too_few_labelled_runs_are_refused_with_the_reason(world_kg):
    Evaluation.objects.create(name="no-runs-yet", kg=world_kg, benchmark="codex-s", sample_size=40, mode="agent")
    with pytest.raises(CommandError, match="at least 20 labelled runs"):
        call_command("calibrate", evaluations="no-runs-yet")
    assert not ConfidenceModel.objects.exists()


def test_runs_on_a_test_split_are_never_fitted_on(labelled):
    held_out = Evaluation.objects.create(name="test-split", kg=labelled.kg, benchmark="codex-s-test", sample_size=40, mode="agent")
    with pytest.raises(CommandError, match="test-split: runs on a test split are held out from every fit"):
        call_command("calibrate", evaluations=f"fit-runs,{held_out.pk}")
    assert not ConfidenceModel.objects.exists()


def test_reviews_of_runs_on_a_test_split_are_skipped(labelled, django_user_model):
    reviewer = django_user_model.objects.create_user("reviewer-h")
    kept, held = [item.run for item in labelled.items.order_by("position")[:2]]
    held_out = Evaluation.objects.create(name="test-split", kg=labelled.kg, benchmark="fb15k-237-test", sample_size=2, mode="agent")
    EvaluationItem.objects.create(evaluation=held_out, task=held.task, expected_label=True, position=0, run=held)
    for run in (kept, held):
        Review.objects.create(run=run, reviewer=reviewer, decision=Review.Decision.ACCEPT, verdict="correct")
    reviewed = {run.pk for run, _ in confidence_fitting.labelled_runs(reviews=True)}
    assert kept.pk in reviewed and held.pk not in reviewed


def test_an_evaluation_name_that_does_not_exist_is_named(labelled):
    with pytest.raises(CommandError, match="no evaluation 'no-such-evaluation'"):
        call_command("calibrate", evaluations="fit-runs,no-such-evaluation")
    assert not ConfidenceModel.objects.exists()


def test_a_fitted_model_moves_between_installations(labelled, tmp_path):
    path = tmp_path / "confidence.json"
    call_command("calibrate", evaluations="fit-runs", export=path)
    fitted = ConfidenceModel.objects.get(active=True)
    data = json.loads(path.read_text())
    assert data["format"] == confidence.FORMAT and data["coefficients"] == fitted.coefficients

    ConfidenceModel.objects.all().delete()
    call_command("calibrate", import_=path, no_reassess=True)
    imported = ConfidenceModel.objects.get(active=True)
    assert imported.kg is None and imported.coefficients == fitted.coefficients and "imported from" in imported.source
    # The fitted triples travel by external ids: recorded again, with their folds, wherever their KG is loaded.
    assert imported.folds == fitted.folds and imported.fitted == fitted.fitted
    FitTriple.objects.all().delete()
    ConfidenceModel.objects.all().delete()
    call_command("calibrate", import_=path, no_reassess=True)
    assert FitTriple.objects.filter(purpose=FitTriple.Purpose.CONFIDENCE, fold__isnull=False).count() == 40
    assert confidence.seed_shipped_models() == []  # a model exists: the shipped one is not imported over it


def test_a_kgs_own_model_ships_for_that_kg_and_is_seeded_when_the_kg_is_loaded(labelled, tmp_path, monkeypatch, capsys):
    kg = labelled.kg
    call_command("calibrate", evaluations="fit-runs", no_reassess=True)  # the model for every KG
    call_command("calibrate", evaluations="fit-runs", kg=kg.name, no_reassess=True, export=tmp_path / "own.json")
    assert json.loads((tmp_path / "own.json").read_text())["kg"] == kg.name
    everyone = ConfidenceModel.objects.get(active=True, kg=None)
    ConfidenceModel.objects.filter(kg=kg).delete()
    capsys.readouterr()

    call_command("calibrate", import_=tmp_path / "own.json", no_reassess=True)
    own = ConfidenceModel.objects.get(kg=kg)
    assert f"for {kg.name} (" in capsys.readouterr().out
    assert confidence.active_model(kg.pk) == own and ConfidenceModel.objects.get(pk=everyone.pk).active

    # Shipped beside the model for every KG as confidence_model.<KG name>.json: seeded once, when the KG is there.
    shipped = tmp_path / "data"
    shipped.mkdir()
    (shipped / f"confidence_model.{kg.name}.json").write_text((tmp_path / "own.json").read_text())
    monkeypatch.setattr(confidence, "SEED_MODEL", shipped / "confidence_model.json")
    ConfidenceModel.objects.filter(kg=kg).delete()
    seeded = confidence.seed_shipped_models()
    assert [model.kg for model in seeded] == [kg] and confidence.active_model(kg.pk) == seeded[0]
    assert confidence.seed_kg_model(kg) is None  # the KG has its own model now: never imported over it

    data = json.loads((tmp_path / "own.json").read_text())
    (tmp_path / "elsewhere.json").write_text(json.dumps({**data, "kg": "not-loaded"}))
    with pytest.raises(CommandError, match="fitted for the KG 'not-loaded', which is not loaded"):
        call_command("calibrate", import_=tmp_path / "elsewhere.json")


def test_an_earlier_model_is_put_back_in_force_and_the_runs_reassessed(labelled, capsys):
    """A KG's own fit that weighs worse than the model for every KG is stood down with --activate; the
    runs' confidences follow the model in force."""
    call_command("calibrate", evaluations="fit-runs", no_reassess=True)
    everyone = ConfidenceModel.objects.get(active=True)
    call_command("calibrate", evaluations="fit-runs", kg=labelled.kg.name, no_reassess=True)
    own = ConfidenceModel.objects.get(active=True, kg=labelled.kg)
    assert confidence.active_model(labelled.kg_id) == own
    capsys.readouterr()

    call_command("calibrate", activate=everyone.pk)
    assert confidence.active_model(labelled.kg_id) == everyone
    assert list(ConfidenceModel.objects.filter(active=True)) == [everyone]
    assert "Re-assessed 40 finished weighed runs" in capsys.readouterr().out
    run = EvaluationItem.objects.filter(evaluation=labelled).first().run
    run.refresh_from_db()
    assert run.assessment["confidence_model"] == everyone.pk

    call_command("calibrate", activate=own.pk, no_reassess=True)  # a KG's model: the one for every KG stays the fallback
    assert confidence.active_model(labelled.kg_id) == own and ConfidenceModel.objects.get(pk=everyone.pk).active
    call_command("calibrate", list=True)
    listed = capsys.readouterr().out.splitlines()[-2:]
    assert listed[0].startswith(f"#{everyone.pk} active, every KG: 40 runs, cross-validated")
    assert listed[1].startswith(f"#{own.pk} active, {labelled.kg.name}: 40 runs")
    with pytest.raises(CommandError, match="no confidence model #0"):
        call_command("calibrate", activate=0)
    call_command("calibrate", evaluations="fit-runs", no_reassess=True)  # a new fit for every KG: all others stand down
    assert ConfidenceModel.objects.filter(active=True).count() == 1 and confidence.active_model(labelled.kg_id).kg is None


def test_a_file_that_is_not_a_confidence_model_is_refused_and_nothing_changes(labelled, tmp_path):
    call_command("calibrate", evaluations="fit-runs")
    before = list(ConfidenceModel.objects.values_list("pk", "active"))
    for content in ("{not json", json.dumps({"format": "something-else"}),
                    json.dumps({"format": confidence.FORMAT, "features": ["agent_correct", "moon_phase"], "coefficients": [1.0, 2.0],
                               "intercept": 0})):
        bad = tmp_path / "bad.json"
        bad.write_text(content)
        with pytest.raises(CommandError, match="bad.json"):
            call_command("calibrate", import_=bad)
    assert list(ConfidenceModel.objects.values_list("pk", "active")) == before


def test_a_model_fitted_before_a_feature_was_added_gives_it_no_weight(labelled, tmp_path):
    older = FEATURES[:10]  # before the article reading joined the features
    path = tmp_path / "older.json"
    path.write_text(json.dumps({"format": confidence.FORMAT, "features": older, "coefficients": [0.5] * len(older),
                                "intercept": 0.1, "folds": [{"coefficients": [1.0] * len(older), "intercept": 0.0}],
                                "fitted": {}}))
    call_command("calibrate", import_=path, no_reassess=True)
    weights = confidence.weights_of(ConfidenceModel.objects.get(active=True))
    assert weights.coefficients == (0.5,) * len(older) + (0.0,) * (len(FEATURES) - len(older))
    assert weights.probability(Evidence("", reading_logit=5.0)) == weights.probability(Evidence(""))


def test_a_model_in_force_fitted_on_other_features_does_not_stop_the_fit_that_replaces_it(labelled, capsys):
    ConfidenceModel.objects.create(features=["a_feature_no_longer_known"], coefficients=[1.0], intercept=0.0, source="old")
    call_command("calibrate", evaluations="fit-runs", no_reassess=True)
    model = ConfidenceModel.objects.get(active=True)
    assert model.source == "evaluation fit-runs" and model.metrics["cross_validated"]["in_force_model"] is None
    assert "The model in force then" not in capsys.readouterr().out


def test_an_agent_evaluation_without_a_confidence_model_is_warned_how_to_activate_the_shipped_one(world_kg):
    warning = confidence.unweighed_warning(world_kg.pk)
    assert "verdicts will be the model's own answers" in warning
    assert "manage.py calibrate --import verifier/data/confidence_model.json" in warning
    confidence.seed_shipped_models()
    assert confidence.unweighed_warning(world_kg.pk) == ""


def test_evidence_runs_pool_with_agent_runs_and_leave_the_model_features_to_the_agent_runs(world_kg, labelled):
    """60 evidence-mode runs (no model answer, no judged sentence) join the 40 agent runs: all inform the
    structural weight; the agent runs alone carry the model's features."""
    rng = random.Random(1)
    evaluation = Evaluation.objects.create(name="evidence-runs", kg=world_kg, benchmark="codex-s", sample_size=60, mode="evidence")
    entities, relations = list(world_kg.entities.all()), list(world_kg.relations.all())
    triples = [(h, r, t) for h, r, t in itertools.product(entities, relations, entities) if h != t][40:100]
    for position, (head, relation, tail) in enumerate(triples):
        label = position % 2 == 0
        task = VerificationTask.objects.create(kg=world_kg, head=head, relation=relation, tail=tail)
        run = Run.objects.create(task=task, status=Run.Status.SUCCEEDED, verdict="not_enough_evidence",
                                 config={"mode": "evidence"}, assessment={"agent_verdict": ""})
        probability = min(0.99, max(0.01, (0.7 if label else 0.35) + rng.uniform(-0.25, 0.25)))
        SupportItem.objects.create(run=run, key="E1", kind=SupportItem.Kind.PLAUSIBILITY, text="plausibility",
                                   payload={"probability": probability, "model": None})
        EvaluationItem.objects.create(evaluation=evaluation, task=task, expected_label=label, position=position, run=run)

    pairs = confidence_fitting.labelled_runs(evaluations=["fit-runs", "evidence-runs"])
    assert len(pairs) == 100
    evidence_vectors = [confidence.stored_evidence(run).vector() for run, _ in pairs if run.config.get("mode") == "evidence"]
    assert len(evidence_vectors) == 60 and all(v[0] == 0.0 for v in evidence_vectors)  # no model answered
    fitted = confidence_fitting.fit(pairs, kg=world_kg, source="pooled")
    assert fitted.n == 100 and fitted.cross_validated["agent_runs"] == 40 and fitted.cross_validated["structural_runs"] == 100
    assert fitted.model.coefficients[confidence.FEATURES.index("structural_logit")] > 0
    assert fitted.cross_validated["answer_accuracy"] == 0.5  # the agent answered Correct to every triple


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_kg_with_no_labelled_runs_gets_its_own_weighing_from_its_calibration_triples(celery_worker_process, capsys,
                                                                                      weighed_by_every_kg):
    """The structural model's calibration triples (facts the KG states and corruptions of them) are verified in the
    evidence mode by the worker, and the KG's own confidence model is fitted on those runs."""
    from verifier.structure.fitting import structural_fit_set
    from verifier.structure.scoring import loaded

    kg, model, shipped = weighed_by_every_kg
    calibrated_on = sorted(structural_fit_set(model).rows)  # what the training's calibration drew
    call_command("calibrate", kg=kg.name, calibration_triples=True, no_progress=True)
    evaluation = Evaluation.objects.get(kg=kg)
    items = list(evaluation.items.select_related("task", "run"))
    verified = sorted((item.task.head_id, item.task.relation_id, item.task.tail_id, item.expected_label) for item in items)
    assert evaluation.mode == "evidence" and evaluation.status == Evaluation.Status.FINISHED
    assert verified == calibrated_on and {label for *_, label in verified} == {True, False}
    # Each run weighed the structural probability of the fit that left its triple's fold out.
    folds = loaded(model).folds
    assert all(folds.get((i.task.head_id, i.task.relation_id, i.task.tail_id)) is not None for i in items)
    own = ConfidenceModel.objects.get(active=True, kg=kg)
    assert own.metrics["n"] == len(verified) and own.coefficients[FEATURES.index("structural_logit")] > 0
    out = capsys.readouterr().out
    assert f"Verifying {len(verified)} labelled triples of {kg.name}" in out
    assert f"fitted on {len(verified)} labelled runs (evaluation {evaluation.name})" in out
    assert f"The model in force then (#{shipped.pk}) weighs the same runs right" in out
    assert f"Re-assessed {len(verified)} finished weighed runs" in out  # weighed by the shipped model, then by its own
    assert {item.run.pk for item in items} == set(Run.objects.filter(assessment__confidence_model=own.pk).values_list("pk", flat=True))
    assert ConfidenceModel.objects.get(pk=shipped.pk).active  # still in force for the other KGs

    call_command("calibrate", kg=kg.name, calibration_triples=True, no_progress=True, no_reassess=True)  # continued, not redrawn
    assert Evaluation.objects.filter(kg=kg).count() == 1 and evaluation.items.filter(run__isnull=False).count() == len(verified)
    assert ConfidenceModel.objects.filter(kg=kg).count() == 3  # its label-free weighing, stood down, and two fits
    recalibrated = io.StringIO()
    call_command("train_kge", kg.name, "--recalibrate", stdout=recalibrated)
    assert "calibrate --kg" not in recalibrated.getvalue()  # it has a weighing of its own now


def test_calibration_triples_need_the_kg_they_come_from(labelled):
    with pytest.raises(CommandError, match="--calibration-triples needs --kg NAME"):
        call_command("calibrate", calibration_triples=True)
