"""The structural model end to end on a small generated KG: PyKEEN training, held-out triples, calibration,
plausibility answers and the refusal to score a triple the model learnt."""

import gc
import io
import json
import logging
import random
from dataclasses import asdict, replace

import numpy as np
import pytest
import torch
from django.db.models import F

from verifier.evaluation.datasets import DATASETS, _Dataset, fitted_triples
from verifier.kg.loader import load_source
from verifier.kg.sources import EntityRecord, KGSource, RelationRecord, TypeRecord
from verifier.memory import bootstrap
from verifier.models import FitTriple, HeldOutTriple, KnowledgeGraph, MinedRule, Run, StructuralModel, VerificationTask
from verifier.runner import execute_run
from verifier.services import start_run
from verifier.structure import kge, scoring
from verifier.structure.calibration import CrossFitted
from verifier.structure.dataset import training_data
from verifier.structure.evidence import PlausibilityReport, StructuralEvidence, Unavailable
from verifier.structure.fitting import calibrate_structural, calibration_line, corruptions, structural_fit_set
from verifier.structure.kge import KGEConfig
from verifier.structure.rules import find_rules
from verifier.structure.training import cut_short_warning, request_training, train
from verifier.tasks import train_structural_model
from verifier.tools.kg_plausibility import observation
from verifier.tools.names import Resolved

TINY = KGEConfig(dim=16, learning_rate=0.01, batch_size=64, entity_dropout=0.0, relation_dropout=0.0, max_epochs=120,
                 eval_every=40, patience=3, max_minutes=5)


def generated_kg(name: str = "towns"):
    """8 countries with 4 cities each; 120 people born in a city and citizens of its country (a rule the
    embedding can learn: born in ∘ located in ⇒ citizen of)."""
    rng = random.Random(7)
    countries = [f"C{i}" for i in range(8)]
    cities = [f"T{i}" for i in range(32)]
    people = [f"P{i}" for i in range(120)]
    triples = [(city, "located_in", countries[i // 4]) for i, city in enumerate(cities)]
    triples += [(cities[4 * i], "capital_of", country) for i, country in enumerate(countries)]
    for person in people:
        city = rng.randrange(len(cities))
        triples += [(person, "born_in", cities[city]), (person, "citizen_of", countries[city // 4])]
    entities = ([EntityRecord(c, f"Country {c}", "a country", [], ["country"]) for c in countries]
                + [EntityRecord(t, f"Town {t}", "a town", [], ["city"]) for t in cities]
                + [EntityRecord(p, f"Person {p}", "a person", [], ["human"]) for p in people])
    relations = [RelationRecord(r, r.replace("_", " "), "") for r in ("located_in", "capital_of", "born_in", "citizen_of")]
    source = KGSource(name, name, "", triples=lambda: iter(triples), entities=entities, relations=relations,
                      types=[TypeRecord("country", "country"), TypeRecord("city", "city"), TypeRecord("human", "human")])
    return load_source(source, embed=False).kg, triples


@pytest.fixture
def towns(db):
    return generated_kg()


def _ids(kg, head, relation, tail):
    return (kg.entities.get(external_id=head).pk, kg.relations.get(external_id=relation).pk, kg.entities.get(external_id=tail).pk)


def test_training_holds_out_queued_triples_and_the_slice_then_calibrates(towns):
    kg, triples = towns
    queued = next(t for t in triples if t[1] == "citizen_of")
    h, r, t = _ids(kg, *queued)
    VerificationTask.objects.create(kg=kg, head_id=h, relation_id=r, tail_id=t)
    reported: list[str] = []
    model = train(kg, config=TINY, report=lambda fraction, stage: reported.append(stage))
    # Progress (and so the heartbeat) comes during the epochs between two validations, not only at them.
    assert "training: epoch 1/120, next validation after epoch 40" in reported
    assert model.status == StructuralModel.Status.READY and model.kg_version == kg.version and model.weights
    assert set(HeldOutTriple.objects.filter(model=model).values_list("reason", flat=True)) == {"queued", "calibration"}
    assert HeldOutTriple.objects.filter(model=model, head_id=h, relation_id=r, tail_id=t, reason="queued").exists()
    held = HeldOutTriple.objects.filter(model=model).count()
    assert model.training_triples == len(triples) - held
    metrics = model.metrics
    assert metrics["validation"]["mrr"] > 0.2  # random ranking among 160 entities gives about 0.03
    assert metrics["epochs"] <= TINY.max_epochs and metrics["history"]
    assert metrics["cut_short"] is False  # the MRR, not the clock, ended it
    # No labelled negatives ship with this KG: calibrated on the slice and corruptions of it, recorded as fitted.
    assert "corruptions" in metrics["calibration"]["source"]
    assert FitTriple.objects.filter(kg=kg, purpose="structural", label=False).exists()
    assert "structural" in model.calibration
    # The rules were mined again from what the network learns: without the queued triple and the slice.
    learnt = [t for t in kg.triples.values_list("head_id", "relation_id", "tail_id")
              if not HeldOutTriple.objects.filter(model=model, head_id=t[0], relation_id=t[1], tail_id=t[2]).exists()]
    stored = {(r.relation_id, str(r.body), r.support) for r in MinedRule.objects.filter(kg=kg)}
    assert stored == {(r.relation, str([list(a) for a in r.body]), r.support) for r in find_rules(np.array(learnt))}


def test_one_vs_all_training_trains_the_inverse_relations_that_predict_heads(towns):
    """1vsAll scores each triple's tail and, through its inverse relation, its head: both sides of the held-out
    triples must rank well, the heads only if the inverse relations learnt."""
    kg, _ = towns
    data = training_data(kg)
    trained = kge.train(replace(TINY, train_type="1vsAll", max_epochs=80), data.train, num_entities=data.num_entities,
                        num_relations=data.num_relations, validation=data.calibration, known=data.known)
    # random ranking among 160 entities gives about 0.03 on each side
    assert trained.validation["head_mrr"] > 0.2 and trained.validation["tail_mrr"] > 0.2
    assert trained.history and trained.epochs <= 80


def test_bfloat16_training_learns_as_float32_does_and_keeps_float32_weights(towns, monkeypatch):
    """Training's products in bfloat16 (autocast) may speed it up; validation scores in float32, the network it
    leaves — what the tools score with and what is stored — stays float32, and it learns the generated KG's
    patterns as float32 training does."""
    kg, _ = towns
    data = training_data(kg)
    scored, build = [], kge.build_model

    def recording(*args, **kwargs):  # the network kge.train builds, noting the number format of its scores
        network = build(*args, **kwargs)
        score_t = network.score_t

        def noted(*a, **k):
            scores = score_t(*a, **k)
            scored.append(scores.dtype)
            return scores

        network.score_t = noted
        return network

    monkeypatch.setattr(kge, "build_model", recording)
    trained = kge.train(replace(TINY, train_type="1vsAll", max_epochs=80, precision="bfloat16"), data.train,
                        num_entities=data.num_entities, num_relations=data.num_relations, validation=data.calibration,
                        known=data.known)
    assert trained.validation["head_mrr"] > 0.2 and trained.validation["tail_mrr"] > 0.2
    assert set(scored) == {torch.bfloat16, torch.float32}  # training's batches, then validation's rankings
    assert {value.dtype for value in trained.model.state_dict().values()} == {torch.float32}
    assert not torch.is_autocast_enabled("cpu")
    with pytest.raises(ValueError, match="unknown precision 'float16'; one of float32, bfloat16"):
        KGEConfig(precision="float16")


def test_the_linear_schedule_lowers_the_learning_rate_at_every_step_to_near_zero_at_the_end(towns, monkeypatch):
    kg, _ = towns
    data = training_data(kg)
    rates = []

    class Recording(torch.optim.Adam):
        def step(self, *args, **kwargs):
            rates.append(self.param_groups[0]["lr"])
            return super().step(*args, **kwargs)

    monkeypatch.setitem(kge.OPTIMIZERS, "Adam", Recording)
    config = replace(TINY, max_epochs=60, eval_every=20, patience=5, lr_schedule="linear")
    trained = kge.train(config, data.train, num_entities=data.num_entities, num_relations=data.num_relations,
                        validation=data.calibration, known=data.known)
    assert trained.epochs == 60 and trained.validation["mrr"] > 0.2
    assert rates[0] == pytest.approx(config.learning_rate, rel=0.01) and all(a >= b for a, b in zip(rates, rates[1:], strict=False))
    # the rate is set from the epoch limit once the first epoch has counted its batches: the last step is one
    # batch from the end
    assert 0 < rates[-1] < config.learning_rate / 20
    assert [h["lr"] for h in trained.history] == sorted((h["lr"] for h in trained.history), reverse=True)
    with pytest.raises(ValueError, match="unknown lr_schedule 'cosine'; one of plateau, linear"):
        KGEConfig(lr_schedule="cosine")


def test_a_triple_the_calibration_was_fitted_on_is_scored_by_the_fit_that_left_it_out(towns):
    kg, _ = towns
    model = train(kg, config=TINY)
    folds = model.metrics["calibration"]["folds"]
    assert folds == 5 and len(model.calibration["structural_folds"]) == folds
    fitted = FitTriple.objects.filter(kg=kg, purpose="structural").select_related("head", "relation", "tail")
    assert fitted.filter(fold__isnull=True).count() == 0 and fitted.count() == model.metrics["calibration"]["n"]
    calibration = CrossFitted.from_stored(model.calibration, "structural")
    for row in fitted.filter(label=False)[:3]:  # corruptions: not KG triples, so the model may score them
        report = StructuralEvidence(kg).plausibility(row.head.external_id, row.relation.external_id, row.tail.external_id)
        relation = str(row.relation_id)
        assert report.probability == pytest.approx(calibration.probability(report.features, relation, row.fold))
        assert report.probability != pytest.approx(calibration.probability(report.features, relation), abs=1e-9)
    # Scored out of fold, so a benchmark may draw them; a fit without folds (the confidence model) stays out.
    assert not fitted_triples(kg)
    row = fitted.first()
    FitTriple.objects.create(kg=kg, purpose="confidence", head=row.head, relation=row.relation, tail=row.tail, label=row.label)
    assert fitted_triples(kg) == {(row.head_id, row.relation_id, row.tail_id)}


def test_a_kg_with_validation_positives_only_calibrates_on_them_and_their_corruptions(towns, tmp_path, settings, monkeypatch):
    """Like FB15k-237: the dataset ships validation triples the KG lacks, and no negatives."""
    kg, triples = towns
    valid = [t for t in triples if t[1] == "citizen_of"][:40]
    ids = [_ids(kg, *t) for t in valid]
    for h, r, t in ids:
        kg.triples.filter(head_id=h, relation_id=r, tail_id=t).delete()
    (tmp_path / "towns").mkdir()
    (tmp_path / "towns" / "valid.txt").write_text("".join("\t".join(t) + "\n" for t in valid))
    settings.KGV_DATA_DIR = tmp_path
    monkeypatch.setitem(DATASETS, "towns", _Dataset("towns", "towns/valid.txt"))
    model = train(kg, config=TINY)
    calibration = model.metrics["calibration"]
    assert calibration["source"] == "towns/valid.txt and type-constrained corruptions of it"
    fitted = FitTriple.objects.filter(kg=kg, purpose="structural")
    assert set(fitted.filter(label=True).values_list("head_id", "relation_id", "tail_id")) == set(ids)
    negatives = set(fitted.filter(label=False).values_list("head_id", "relation_id", "tail_id"))
    in_kg = set(kg.triples.values_list("head_id", "relation_id", "tail_id"))
    assert len(negatives) > 30 and not negatives & (in_kg | set(ids))
    assert calibration["folds"] == 5 and not fitted.filter(fold__isnull=True).exists()
    # Early stopping ranked half the validation split and the other half reports an MRR no epoch was chosen on;
    # the slice shrinks to one triple of each relation of 20 or more (not capital_of), what the memory bootstrap draws.
    metrics = model.metrics
    assert metrics["validation"]["triples"] == metrics["dataset_validation_unranked"]["triples"] == 20
    assert metrics["dataset_validation"]["triples"] == 40
    slice_ = HeldOutTriple.objects.filter(model=model, reason="calibration")
    assert metrics["held_out"]["calibration"] == slice_.count() == 3
    assert not set(slice_.values_list("head_id", "relation_id", "tail_id")) & set(ids)
    # The memory bootstrap draws true triples from the slice and as many corruptions, none a validation triple.
    drawn = bootstrap.draw(kg, 4)
    labels = [label for *_, label in drawn]
    assert labels.count(True) == labels.count(False) == 2
    assert bootstrap.labelled_triples(kg) == set(ids) and not {row[:3] for row in drawn} & set(ids)
    # Without the dataset's file (a KG loaded elsewhere), the slice and its corruptions calibrate it.
    (tmp_path / "towns" / "valid.txt").unlink()
    assert "calibration slice" in calibrate_structural(model)["source"]


def test_corruptions_up_to_a_limit_go_on_past_a_positive_that_has_no_replacement(towns):
    """What keeps the memory bootstrap's two halves the same size in a KG whose types leave some true triples
    without a same-type replacement: the next positives are corrupted instead."""
    kg, triples = towns
    positives = [_ids(kg, *t) for t in triples if t[1] == "citizen_of"][:8]
    head, relation, tail = positives[0]
    everyone = list(kg.entities.values_list("pk", flat=True))
    no_replacement = {(head, relation, e) for e in everyone} | {(e, relation, tail) for e in everyone}
    negatives = corruptions(kg, positives, also_true=no_replacement, limit=3)
    assert len(negatives) == 3 and not any(label for *_, label in negatives)
    assert not {n[:3] for n in negatives} & (no_replacement | set(kg.triples.values_list("head_id", "relation_id", "tail_id")))
    assert corruptions(kg, positives[:1], also_true=no_replacement) == []  # the first alone has none


def test_verified_negatives_are_joined_by_corruptions_of_a_quarter_of_the_positives(towns, tmp_path, settings, monkeypatch):
    """Like CoDEx-S: the dataset ships verified negatives; corruptions of a quarter of its positives join them,
    so the calibration also meets false triples the network finds implausible."""
    kg, triples = towns
    valid = [t for t in triples if t[1] == "citizen_of"][:40]
    ids = [_ids(kg, *t) for t in valid]
    for h, r, t in ids:
        kg.triples.filter(head_id=h, relation_id=r, tail_id=t).delete()
    countries = sorted({t for _, _, t in triples if t.startswith("C")})
    wrong = [(h, r, next(c for c in countries if c != t)) for h, r, t in valid[:20]]  # a citizenship of the wrong country
    (tmp_path / "towns").mkdir()
    (tmp_path / "towns" / "valid.txt").write_text("".join("\t".join(t) + "\n" for t in valid))
    (tmp_path / "towns" / "valid_negatives.txt").write_text("".join("\t".join(t) + "\n" for t in wrong))
    settings.KGV_DATA_DIR = tmp_path
    monkeypatch.setitem(DATASETS, "towns", _Dataset("towns", "towns/valid.txt", "towns/valid_negatives.txt"))
    model = train(kg, config=TINY)
    assert model.metrics["calibration"]["source"] == ("the labelled towns/valid.txt / towns/valid_negatives.txt and "
                                                      "type-constrained corruptions of a quarter of its positives")
    fitted = FitTriple.objects.filter(kg=kg, purpose="structural")
    negatives = set(fitted.filter(label=False).values_list("head_id", "relation_id", "tail_id"))
    verified = {_ids(kg, *t) for t in wrong}
    corrupted = negatives - verified
    assert verified <= negatives and len(corrupted) == 10
    in_kg = set(kg.triples.values_list("head_id", "relation_id", "tail_id"))
    assert not corrupted & (in_kg | set(ids))
    # The out-of-fold figures are reported against each kind of negative, as train_kge prints them.
    against = model.metrics["calibration"]["against"]
    assert set(against) == {"verified", "corruptions"}
    assert all(0 <= figures["cross_validated_matched_accuracy"] <= 1 for figures in against.values())


def test_an_interrupted_training_is_marked_failed_not_left_training(towns, monkeypatch):
    """Ctrl-C, or SIGTERM through train_kge, on a foreground training: the row says so and no run waits on it."""
    kg, _ = towns

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(kge, "train", interrupted)
    with pytest.raises(KeyboardInterrupt):
        train(kg, config=TINY)
    row = StructuralModel.objects.filter(kg=kg).latest("pk")
    assert row.status == StructuralModel.Status.FAILED and row.error == "interrupted before it finished"
    assert StructuralModel.objects.ready_for(kg) is None


def test_a_recalibrated_model_is_scored_with_its_new_calibration(towns):
    kg, _ = towns
    model = train(kg, config=TINY)
    before = scoring.loaded(StructuralModel.objects.ready_for(kg))
    assert before.calibration_stamp == model.calibrated_at.isoformat()
    calibrate_structural(model)
    ready = StructuralModel.objects.ready_for(kg)  # what every tool call reads: the stamp, not the calibration
    assert "calibration" in ready.get_deferred_fields() and ready.calibration_stamp == model.calibrated_at.isoformat()
    after = scoring.loaded(ready)
    assert after is not before and after.calibration_stamp == ready.calibration_stamp != before.calibration_stamp


def test_a_queued_triple_is_never_scored_by_a_model_trained_on_it(towns):
    kg, triples = towns
    model = train(kg, config=TINY)
    slice_ = set(HeldOutTriple.objects.filter(model=model).values_list("head_id", "relation_id", "tail_id"))
    learnt = next(t for t in triples if t[1] == "citizen_of" and _ids(kg, *t) not in slice_)
    assert scoring.trained_on(model, *_ids(kg, *learnt))
    # The tools ask the loaded model, the anti-leakage proof the database: the same rule for every KG triple.
    loaded = scoring.loaded(StructuralModel.objects.ready_for(kg))
    for triple in triples:
        assert loaded.learnt(*_ids(kg, *triple)) == scoring.trained_on(model, *_ids(kg, *triple))
    # Asked about without being queued (an agent or a curator exploring): refused, and no training started.
    refused = StructuralEvidence(kg).plausibility(*learnt)
    assert isinstance(refused, Unavailable) and "learnt this triple" in refused.message
    assert not StructuralModel.objects.filter(kg=kg, status=StructuralModel.Status.QUEUED).exists()
    # Queued after training: the model learnt it, so it refuses and asks for a model trained without it.
    h, r, t = _ids(kg, *learnt)
    VerificationTask.objects.create(kg=kg, head_id=h, relation_id=r, tail_id=t)
    refused = StructuralEvidence(kg).plausibility(*learnt)
    assert isinstance(refused, Unavailable) and "trained with this very triple" in refused.message
    requested = StructuralModel.objects.filter(kg=kg, status=StructuralModel.Status.QUEUED).get()
    assert "queued triple" in requested.stage
    # The next model is trained without it, and answers.
    retrained = train(kg, config=TINY, row=requested)
    assert not scoring.trained_on(retrained, h, r, t)
    answer = StructuralEvidence(kg).plausibility(*learnt)
    assert isinstance(answer, PlausibilityReport) and answer.model.pk == retrained.pk
    assert 0.0 <= answer.probability <= 1.0
    assert StructuralModel.objects.get(pk=model.pk).status == StructuralModel.Status.SUPERSEDED


def test_plausibility_ranks_the_true_country_among_countries_only(towns):
    kg, triples = towns
    train(kg, config=TINY)
    slice_triple = HeldOutTriple.objects.filter(reason="calibration", relation__external_id="citizen_of").select_related(
        "head", "relation", "tail").first()
    report = StructuralEvidence(kg).plausibility(slice_triple.head.external_id, "citizen_of", slice_triple.tail.external_id)
    assert isinstance(report, PlausibilityReport)
    assert report.tail.candidates == 8  # type-compatible tails: the countries
    assert report.head.candidates == 120  # type-compatible heads: the people
    assert len(report.tail.alternatives) == 3 and all(a.id.startswith("C") for a in report.tail.alternatives)
    # Every person is described alike ("a person"), so the ten neighbours are ten other citizens, each voting.
    assert report.text.neighbours == 10 and 0.0 <= report.text.share <= 1.0
    assert len(report.text.holders) == min(3, round(report.text.share * 10))
    head, relation, tail = (Resolved(e, label) for e, label in ((slice_triple.head.external_id, slice_triple.head.label),
                                                                ("citizen_of", "citizen of"),
                                                                (slice_triple.tail.external_id, slice_triple.tail.label)))
    shown = observation(report, head, relation, tail, "towns").text
    assert f"Of the 10 entities described most like {head.label} with a known citizen of" in shown
    assert f"The text about {head.label} does not name {tail.label}" in shown


def test_the_embedding_classifier_alone_is_calibrated_beside_the_plausibility_and_decides_its_own_baseline(towns):
    """What the text and the rules add is measured against the network's scores alone, calibrated on the same
    labelled triples and folds: the `embedding` mode decides from that probability, the `kge` mode from the
    plausibility, on the same tool call."""
    kg, _ = towns
    model = train(kg, config=TINY)
    assert model.metrics["calibration"]["embedding"]["cross_validated_matched_accuracy"] > 0.5
    assert "; the embedding classifier alone relation-matched " in calibration_line(model.metrics["calibration"])
    assert CrossFitted.from_stored(model.calibration, "embedding").full.features == scoring.EMBEDDING_FEATURES
    held = HeldOutTriple.objects.filter(model=model, reason="calibration", relation__external_id="citizen_of").first()
    report = StructuralEvidence(kg).plausibility(held.head.external_id, "citizen_of", held.tail.external_id)
    assert 0.0 < report.embedding_probability < 1.0 and report.embedding_probability != report.probability
    task = VerificationTask.objects.create(kg=kg, head=held.head, relation=held.relation, tail=held.tail)
    verdicts = {}
    for mode, field in (("embedding", report.embedding_probability), ("kge", report.probability)):
        run = start_run(task=task, config={"mode": mode}, queue=False)
        execute_run(run.pk, llm=object())  # would fail loudly if it tried to call a model
        run.refresh_from_db()
        assert run.status == Run.Status.SUCCEEDED
        assert run.verdict == ("correct" if field >= 0.5 else "incorrect")
        assert run.confidence == pytest.approx(field if field >= 0.5 else 1 - field)
        verdicts[mode] = run.steps.get(kind="verdict").content
    assert "the embedding classifier's calibrated probability" in verdicts["embedding"]
    assert "the calibrated structural probability" in verdicts["kge"]


def test_without_a_model_the_tool_says_why(towns):
    kg, _ = towns
    assert "No structural model has been trained" in StructuralEvidence(kg).plausibility("P1", "citizen_of", "C1").message
    StructuralModel.objects.create(kg=kg, kg_version=kg.version, status=StructuralModel.Status.TRAINING, progress=0.4,
                                   stage="training: epoch 40/120")
    message = StructuralEvidence(kg).plausibility("P1", "citizen_of", "C1").message
    assert "still training (40%: training: epoch 40/120)" in message


def test_an_unknown_the_kg_cannot_tie_is_resolved_with_the_models_predictions(towns):
    # "P3 was born in a town that lies in <P3's country>": the KG lost where P3 was born, so every town of that
    # country ties alike through "located in"; the structural model's link prediction breaks the tie.
    from verifier.claims.decompose import Decomposition, Named
    from verifier.claims.resolve import resolve
    from verifier.claims.subgraph import PseudoTriple
    from verifier.models import Entity, Relation, Triple

    kg, triples = towns
    born = next(t for t in triples if t[0] == "P3" and t[1] == "born_in")
    country = next(t[2] for t in triples if t[0] == "P3" and t[1] == "citizen_of")
    Triple.objects.filter(kg=kg, head__external_id="P3", relation__external_id="born_in").delete()
    towns_there = {t[0] for t in triples if t[1] == "located_in" and t[2] == country}
    assert born[2] in towns_there

    def named(model, external_id):
        row = model.objects.get(kg=kg, external_id=external_id)
        return Named(row.pk, row.external_id, row.label)

    claim = Decomposition("", [PseudoTriple("Person P3", "born in", "unknown_1"),
                               PseudoTriple("unknown_1", "located in", f"Country {country}")],
                          {"Person P3": named(Entity, "P3"), f"Country {country}": named(Entity, country)},
                          {"born in": named(Relation, "born_in"), "located in": named(Relation, "located_in")})
    without_model = resolve(kg, claim)["unknown_1"]
    assert without_model.entity.external_id in towns_there and without_model.score == 1.0  # four towns tie

    train(kg, config=TINY)
    model = scoring.loaded(StructuralModel.objects.ready_for(kg))
    predicted = model.predicted(named(Entity, "P3").pk, named(Relation, "born_in").pk, "tail", 5)
    assert len(predicted) == 5 and all(Entity.objects.get(pk=pk).external_id.startswith("T") for pk, _ in predicted)
    assert [p for _, p in predicted] == sorted((p for _, p in predicted), reverse=True)
    with_model = resolve(kg, claim)["unknown_1"]
    assert with_model.entity.external_id in towns_there and with_model.score > 1.0  # the tie and the prediction
    assert with_model.candidates[0][1] >= with_model.candidates[-1][1]


def test_a_training_the_budget_ends_while_it_still_improves_says_so_and_how_to_train_longer(towns, caplog):
    """The budget is wall-clock: a busy machine fits fewer epochs into it, and the model it leaves is weaker than
    the KG allows. The command and the KG's status line say so (a queued training's worker logs the same line)."""
    from django.core.management import call_command

    from verifier.selectors import model_summary

    out = io.StringIO()
    rushed = replace(TINY, eval_every=1, max_minutes=1e-4)  # the first validation already overruns it
    call_command("train_kge", "towns", "--config", json.dumps(asdict(rushed)), "--no-progress", stdout=out)
    row = StructuralModel.objects.get(kg=towns[0], status=StructuralModel.Status.READY)
    assert row.metrics["cut_short"] is True and row.metrics["epochs"] == 1
    assert row.metrics["stopped_because"] == "time budget of 0.0001 minutes, the held-out MRR still rising"
    text = out.getvalue()
    only = f"{row.metrics['history'][0]['mrr']:.3f}"  # one validation: no rise to show beside it
    assert (f"The 0.0001-minute budget ended the training of structural model #{row.pk} of towns after 1 epoch while its "
            f"held-out MRR was still rising ({only} at the last validation)") in text
    assert """manage.py train_kge towns --config '{"max_minutes": 0.0002}'""" in text
    assert model_summary(row).endswith(", cut short by its time budget")

    queued = request_training(towns[0], config=asdict(rushed))  # the same, trained by a worker for the workbench
    with caplog.at_level(logging.WARNING, logger="verifier.tasks"):
        assert train_structural_model(queued.pk) == StructuralModel.Status.READY
    logged = [r.getMessage() for r in caplog.records if r.name == "verifier.tasks"]
    assert logged == [cut_short_warning(StructuralModel.objects.get(pk=queued.pk))]
    assert f"structural model #{queued.pk} of towns" in logged[0]


def test_a_retraining_that_did_worse_can_be_rolled_back_to_the_model_it_replaced(towns):
    from django.core.management import CommandError, call_command

    from verifier.selectors import structural_statuses

    kg, _ = towns
    quick = replace(TINY, max_epochs=20, eval_every=20)  # how good the models are does not matter here
    first = train(kg, config=quick)
    # A KG triple flagged after the first training: the second holds it out, and so draws another slice.
    flagged = next(t for t in kg.triples.values_list("head_id", "relation_id", "tail_id")
                   if not HeldOutTriple.objects.filter(model=first, head_id=t[0], relation_id=t[1], tail_id=t[2]).exists())
    VerificationTask.objects.create(kg=kg, head_id=flagged[0], relation_id=flagged[1], tail_id=flagged[2])
    out = io.StringIO()
    call_command("train_kge", "towns", "--config", json.dumps(asdict(quick)), "--no-progress", stdout=out)
    second = StructuralModel.objects.ready_for(kg)
    slice_of = {m: set(HeldOutTriple.objects.filter(model=m, reason="calibration").values_list("head_id", "relation_id", "tail_id"))
                for m in (first, second)}
    assert slice_of[first] != slice_of[second]
    assert f"It replaces model #{first.pk}; to undo: manage.py train_kge towns --restore {first.pk}" in out.getvalue()
    assert "manage.py calibrate --kg towns --calibration-triples" in out.getvalue()  # no weighing of its own yet
    assert StructuralModel.objects.filter(pk=first.pk, status="superseded", weights__isnull=False).exists()
    assert gc.get_freeze_count() == 0  # what training froze (docs in kge.train) is collectable again
    out = io.StringIO()
    call_command("train_kge", "towns", "--restore", str(first.pk), stdout=out)
    assert f"#{first.pk} of towns v{kg.version} is ready again" in out.getvalue()
    assert StructuralModel.objects.ready_for(kg).pk == first.pk
    # Calibrated again as itself: its own slice is what the fit triples hold, and the rules are mined without its
    # held-out triples and without the triple flagged since (which it learnt, and which it may be asked about).
    assert set(FitTriple.objects.filter(kg=kg, purpose="structural", label=True)
               .values_list("head_id", "relation_id", "tail_id")) == slice_of[first]
    held = set(HeldOutTriple.objects.filter(model=first).values_list("head_id", "relation_id", "tail_id")) | {flagged}
    learnt = np.array([t for t in kg.triples.values_list("head_id", "relation_id", "tail_id") if t not in held])
    assert {(r.relation_id, str(r.body), r.support) for r in MinedRule.objects.filter(kg=kg)} == {
        (r.relation, str([list(a) for a in r.body]), r.support) for r in find_rules(learnt)}
    answer = StructuralEvidence(kg).plausibility("P0", "citizen_of", "C7")  # not a KG triple: any model may score it
    assert isinstance(answer, PlausibilityReport) and answer.model.pk == first.pk
    [status] = structural_statuses([kg.pk])
    assert status.state == "ready" and status.model_id == status.ready_model_id == first.pk
    # A third model supersedes the restored one; the second, replaced before, gives its weights up.
    third = train(kg, config=quick)
    assert StructuralModel.objects.filter(pk=second.pk, weights__isnull=True).exists()
    with pytest.raises(CommandError, match=rf"its weights were released. Restorable: #{first.pk} "):
        call_command("train_kge", "towns", "--restore", str(second.pk))
    with pytest.raises(CommandError, match="already the ready model"):
        call_command("train_kge", "towns", "--restore", str(third.pk))
    # A model of an older version of the KG can never come back: it gives its weights up when replaced.
    KnowledgeGraph.objects.filter(pk=kg.pk).update(version=F("version") + 1)
    kg.refresh_from_db()
    train(kg, config=quick)
    assert not StructuralModel.objects.filter(kg=kg, weights__isnull=False).exclude(kg_version=kg.version).exists()
    with pytest.raises(CommandError, match=rf"#{third.pk} cannot be restored: its weights were released. Restorable: none"):
        call_command("train_kge", "towns", "--restore", str(third.pk))


def test_n3_penalises_the_cubed_moduli_of_what_each_batch_uses_and_shrinks_the_network_as_both_loops_learn(towns):
    kg, _ = towns
    data = training_data(kg)
    network = kge.build_model(TINY, data.num_entities, data.num_relations)
    entities = network.entity_representations[0](indices=None).detach()
    relations = network.relation_representations[0](indices=None).detach()

    def cubed(vector):  # ComplEx: the (real, imaginary) pairs' moduli, cubed and summed
        return float(sum((vector[i] ** 2 + vector[i + 1] ** 2) ** 1.5 for i in range(0, len(vector), 2)))

    rows = torch.tensor([[0, 1, 2], [0, 1, 3]])
    one_vs_all = 0.5 * (2 * cubed(entities[0]) + 2 * cubed(relations[1]) + cubed(entities[2]) + cubed(entities[3])) / 2
    assert float(kge._n3(network, rows, 0.5).detach()) == pytest.approx(one_vs_all, rel=1e-5)
    assert float(kge._n3(network, rows[:, :2], 0.5).detach()) == pytest.approx(0.5 * (cubed(entities[0]) + cubed(relations[1])), rel=1e-5)

    for train_type in kge.TRAIN_TYPES:
        config = replace(TINY, train_type=train_type, max_epochs=60, eval_every=60)
        sizes = {}
        for weight in (0.0, 0.2):
            trained = kge.train(replace(config, regularize_weight=weight), data.train, num_entities=data.num_entities,
                                num_relations=data.num_relations, validation=data.calibration, known=data.known)
            assert trained.validation["mrr"] > 0.2, (train_type, weight)
            sizes[weight] = float(trained.model.entity_representations[0](indices=None).norm())
        assert sizes[0.2] < 0.8 * sizes[0.0], (train_type, sizes)


def test_embeddings_start_from_a_normal_of_the_chosen_spread():
    small = kge.build_model(replace(TINY, init_std=1e-3), 500, 4)
    assert float(small.entity_representations[0](indices=None).detach().std()) == pytest.approx(1e-3, rel=0.1)
    xavier = kge.build_model(TINY, 500, 4)
    assert float(xavier.entity_representations[0](indices=None).detach().std()) > 0.03


def test_a_slice_its_types_cannot_corrupt_is_calibrated_on_corruptions_by_the_relations_roles(db):
    """A small dense KG whose entities each play roles of their own (UMLS: 29 of 135 share them) gave its
    calibration almost no false triples; the relation's roles corrupt every slice triple."""
    people = [f"H{i}" for i in range(6)]
    friends = [f"F{i}" for i in range(6)]
    triples = [(h, "likes", f) for i, h in enumerate(people) for f in friends[i:i + 2]]
    triples += [(h, f"owns_{i}", "X") for i, h in enumerate(people)] + [(f, f"drives_{i}", "Y") for i, f in enumerate(friends)]
    source = KGSource("dense", "dense", "", triples=lambda: iter(triples))
    kg = load_source(source, embed=False).kg
    model = StructuralModel.objects.create(kg=kg, kg_version=kg.version)
    held = [("H0", "likes", "F3"), ("H1", "likes", "F4"), ("H2", "likes", "F0"), ("H3", "likes", "F1")]
    for triple in held:
        h, r, t = _ids(kg, *triple)
        HeldOutTriple.objects.create(model=model, head_id=h, relation_id=r, tail_id=t, reason="calibration")
    assert corruptions(kg, [_ids(kg, *t) for t in held]) == []  # no two entities share a signature
    fit_set = structural_fit_set(model)
    assert fit_set.source == "the held-out calibration slice and corruptions of it by the relation's roles"
    assert fit_set.labels.sum() == 4 and (~fit_set.labels).sum() == 4
    in_kg = set(kg.triples.values_list("head_id", "relation_id", "tail_id"))
    likes = kg.relations.get(external_id="likes").pk
    assert all(row[1] == likes and row[:3] not in in_kg for row in fit_set.rows if not row[3])
