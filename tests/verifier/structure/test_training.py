"""The structural model end to end on a small generated KG: PyKEEN training of one network per fold, calibration,
and plausibility answers for any triple — a KG fact by the network that never learnt it."""

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

from verifier import confidence, memory_bootstrap
from verifier.benchmarks.datasets import DATASETS, _Dataset, fitted_triples
from verifier.kg.loader import load_source
from verifier.kg.sources import EntityRecord, KGSource, RelationRecord, TypeRecord
from verifier.models import ConfidenceModel, FitTriple, FoldNetwork, KnowledgeGraph, MinedRule, Run, StructuralModel, VerificationTask
from verifier.runner import execute_run
from verifier.services import start_run
from verifier.structure import kge, scoring
from verifier.structure.calibration import CrossFitted
from verifier.structure.dataset import training_data
from verifier.structure.evidence import PlausibilityReport, StructuralEvidence
from verifier.structure.fitting import calibrate_structural, calibration_line, corruptions, structural_fit_set
from verifier.structure.folds import fold_of_one
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


def train_towns(kg, config: KGEConfig = TINY, **kwargs) -> StructuralModel:
    """Two networks: enough to show the folds, half the minutes of the default five."""
    return train(kg, config=config, folds=2, **kwargs)


def _ids(kg, head, relation, tail):
    return (kg.entities.get(external_id=head).pk, kg.relations.get(external_id=relation).pk, kg.entities.get(external_id=tail).pk)


@pytest.mark.slow
def test_each_network_learns_every_triple_outside_its_fold_then_the_model_calibrates(towns):
    kg, triples = towns
    flagged = next(t for t in triples if t[1] == "citizen_of")
    h, r, t = _ids(kg, *flagged)
    VerificationTask.objects.create(kg=kg, head_id=h, relation_id=r, tail_id=t)
    reported: list[str] = []
    model = train_towns(kg, report=lambda fraction, stage: reported.append(stage))
    # Progress (and so the heartbeat) comes during the epochs between two validations, with the time left.
    assert any(stage.startswith("training: network 1 of 2, epoch 1/120, next validation after epoch 40") for stage in reported)
    assert any(" left" in stage for stage in reported)
    assert model.status == StructuralModel.Status.READY and model.kg_version == kg.version and model.folds == 2
    networks = FoldNetwork.objects.filter(model=model)
    assert sorted(networks.values_list("fold", flat=True)) == [0, 1]
    data = training_data(kg, folds=2)
    for network in networks:  # each learnt exactly the triples outside its fold, the flagged one included or not
        assert network.metrics["training_triples"] == len(data.train(network.fold)) == (data.folds != network.fold).sum()
    assert model.training_triples == len(triples)
    metrics = model.metrics
    # each network ranks the half of the KG it never saw (a person's birthplace gone with the citizenship it
    # implies): random ranking among 160 entities gives about 0.03
    assert metrics["validation"]["mrr"] > 0.09
    assert len(metrics["networks"]) == 2 and metrics["cut_short"] is False  # the MRR, not the clock, ended them
    # No labelled negatives ship with this KG: calibrated on its facts and corruptions of them, recorded as fitted.
    assert metrics["calibration"]["source"].startswith("facts the KG states and corruptions of them")
    assert FitTriple.objects.filter(kg=kg, purpose="structural", label=False).exists()
    assert "structural" in model.calibration
    # The rules are mined from the whole KG: a rule never uses the triple it speaks for as an edge (test_rules.py).
    stored = {(r.relation_id, str(r.body), r.support) for r in MinedRule.objects.filter(kg=kg)}
    everything = np.array(list(kg.triples.values_list("head_id", "relation_id", "tail_id")))
    assert stored == {(r.relation, str([list(a) for a in r.body]), r.support) for r in find_rules(everything)}
    # The flagged fact is scored at once, by the network of its fold, and no training was asked for.
    report = StructuralEvidence(kg).plausibility(*flagged)
    assert isinstance(report, PlausibilityReport) and report.fold == fold_of_one(h, r, t, 2)
    assert not StructuralModel.objects.filter(kg=kg).in_flight().exists()


@pytest.mark.slow
def test_one_vs_all_training_trains_the_inverse_relations_that_predict_heads(towns):
    """1vsAll scores each triple's tail and, through its inverse relation, its head: both sides of the held-out
    triples must rank well, the heads only if the inverse relations learnt."""
    kg, _ = towns
    data = training_data(kg, folds=5)
    trained = kge.train(replace(TINY, train_type="1vsAll", max_epochs=80), data.train(0), num_entities=data.num_entities,
                        num_relations=data.num_relations, validation=data.stopping(0), known=data.known)
    # random ranking among 160 entities gives about 0.03 on each side
    assert trained.validation["head_mrr"] > 0.1 and trained.validation["tail_mrr"] > 0.1
    assert trained.history and trained.epochs <= 80


@pytest.mark.slow
def test_bfloat16_training_learns_as_float32_does_and_keeps_float32_weights(towns, monkeypatch):
    """Training's products in bfloat16 (autocast) may speed it up; validation scores in float32, the network it
    leaves — what the tools score with and what is stored — stays float32, and it learns the generated KG's
    patterns as float32 training does."""
    kg, _ = towns
    data = training_data(kg, folds=5)
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
    trained = kge.train(replace(TINY, train_type="1vsAll", max_epochs=80, precision="bfloat16"), data.train(0),
                        num_entities=data.num_entities, num_relations=data.num_relations, validation=data.stopping(0),
                        known=data.known)
    assert trained.validation["head_mrr"] > 0.1 and trained.validation["tail_mrr"] > 0.1
    assert set(scored) == {torch.bfloat16, torch.float32}  # training's batches, then validation's rankings
    assert {value.dtype for value in trained.model.state_dict().values()} == {torch.float32}
    assert not torch.is_autocast_enabled("cpu")
    with pytest.raises(ValueError, match="unknown precision 'float16'; one of float32, bfloat16"):
        KGEConfig(precision="float16")


@pytest.mark.slow
def test_the_linear_schedule_lowers_the_learning_rate_at_every_step_to_near_zero_at_the_end(towns, monkeypatch):
    kg, _ = towns
    data = training_data(kg, folds=5)
    rates = []

    class Recording(torch.optim.Adam):
        def step(self, *args, **kwargs):
            rates.append(self.param_groups[0]["lr"])
            return super().step(*args, **kwargs)

    monkeypatch.setitem(kge.OPTIMIZERS, "Adam", Recording)
    config = replace(TINY, max_epochs=60, eval_every=20, patience=5, lr_schedule="linear")
    trained = kge.train(config, data.train(0), num_entities=data.num_entities, num_relations=data.num_relations,
                        validation=data.stopping(0), known=data.known)
    assert trained.epochs == 60 and trained.validation["mrr"] > 0.1
    assert rates[0] == pytest.approx(config.learning_rate, rel=0.01) and all(a >= b for a, b in zip(rates, rates[1:], strict=False))
    # the rate is set from the epoch limit once the first epoch has counted its batches: the last step is one
    # batch from the end
    assert 0 < rates[-1] < config.learning_rate / 20
    assert [h["lr"] for h in trained.history] == sorted((h["lr"] for h in trained.history), reverse=True)
    with pytest.raises(ValueError, match="unknown lr_schedule 'cosine'; one of plateau, linear"):
        KGEConfig(lr_schedule="cosine")


@pytest.mark.slow
def test_a_triple_the_calibration_was_fitted_on_is_scored_by_the_fit_that_left_it_out(towns):
    kg, _ = towns
    model = train_towns(kg)
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


@pytest.mark.slow
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
    model = train_towns(kg)
    calibration = model.metrics["calibration"]
    assert calibration["source"] == "towns/valid.txt and type-constrained corruptions of it"
    fitted = FitTriple.objects.filter(kg=kg, purpose="structural")
    assert set(fitted.filter(label=True).values_list("head_id", "relation_id", "tail_id")) == set(ids)
    negatives = set(fitted.filter(label=False).values_list("head_id", "relation_id", "tail_id"))
    in_kg = set(kg.triples.values_list("head_id", "relation_id", "tail_id"))
    assert len(negatives) > 30 and not negatives & (in_kg | set(ids))
    assert calibration["folds"] == 5 and not fitted.filter(fold__isnull=True).exists()
    # Early stopping ranked half the validation split; the other half reports an MRR no epoch was chosen on.
    metrics = model.metrics
    assert metrics["validation"]["mrr"] > 0 and metrics["dataset_validation"]["triples"] == 20
    assert all(n["validation"]["triples"] == 20 for n in metrics["networks"])
    # The memory bootstrap draws true triples from the KG's facts and as many corruptions, none a validation triple.
    drawn = memory_bootstrap.draw(kg, 4)
    labels = [label for *_, label in drawn]
    assert labels.count(True) == labels.count(False) == 2
    assert memory_bootstrap.labelled_triples(kg) == set(ids) and not {row[:3] for row in drawn} & set(ids)
    # Without the dataset's file (a KG loaded elsewhere), its own facts and their corruptions calibrate it.
    (tmp_path / "towns" / "valid.txt").unlink()
    assert calibrate_structural(model)["source"].startswith("facts the KG states")


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


@pytest.mark.slow
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
    model = train_towns(kg)
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


@pytest.mark.slow
def test_a_recalibrated_model_is_scored_with_its_new_calibration(towns):
    kg, _ = towns
    model = train_towns(kg)
    before = scoring.loaded(StructuralModel.objects.ready_for(kg))
    assert before.calibration_stamp == model.calibrated_at.isoformat()
    calibrate_structural(model)
    ready = StructuralModel.objects.ready_for(kg)  # what every tool call reads: the stamp, not the calibration
    assert "calibration" in ready.get_deferred_fields() and ready.calibration_stamp == model.calibrated_at.isoformat()
    after = scoring.loaded(ready)
    assert after is not before and after.calibration_stamp == ready.calibration_stamp != before.calibration_stamp


@pytest.mark.slow
def test_a_kg_fact_is_scored_by_the_network_that_never_learnt_it(towns):
    kg, triples = towns
    model = train_towns(kg)
    fact = next(t for t in triples if t[1] == "citizen_of")
    h, r, t = _ids(kg, *fact)
    own = fold_of_one(h, r, t, 2)
    # The anti-leakage proof: the other network learnt it, its own never did.
    assert not scoring.trained_on(model, h, r, t, own) and scoring.trained_on(model, h, r, t, 1 - own)
    report = StructuralEvidence(kg).plausibility(*fact)
    assert isinstance(report, PlausibilityReport) and report.fold == own and 0.0 <= report.probability <= 1.0
    # Queued as a flagged triple: scored the same way at once, and nothing is trained again.
    VerificationTask.objects.create(kg=kg, head_id=h, relation_id=r, tail_id=t)
    again = StructuralEvidence(kg).plausibility(*fact)
    assert again.probability == pytest.approx(report.probability) and again.model.pk == model.pk
    assert not StructuralModel.objects.filter(kg=kg).in_flight().exists()
    # A triple the KG lacks is scored by the network of its own fold too.
    lacking = ("P0", "citizen_of", next(c for c in ("C0", "C1") if ("P0", "citizen_of", c) not in triples))
    assert StructuralEvidence(kg).plausibility(*lacking).fold == fold_of_one(*_ids(kg, *lacking), 2)


@pytest.mark.slow
def test_plausibility_ranks_the_true_country_among_countries_only(towns):
    kg, triples = towns
    train_towns(kg)
    slice_triple = kg.triples.filter(relation__external_id="citizen_of").select_related("head", "relation", "tail").first()
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


@pytest.mark.slow
def test_the_embedding_classifier_alone_is_calibrated_beside_the_plausibility_and_decides_its_own_baseline(towns):
    """What the text and the rules add is measured against the network's scores alone, calibrated on the same
    labelled triples and folds: the `embedding` mode decides from that probability, the `kge` mode from the
    plausibility, on the same tool call."""
    kg, _ = towns
    model = train_towns(kg)
    assert model.metrics["calibration"]["embedding"]["cross_validated_matched_accuracy"] > 0.5
    assert "; the embedding classifier alone relation-matched " in calibration_line(model.metrics["calibration"])
    assert CrossFitted.from_stored(model.calibration, "embedding").full.features == scoring.EMBEDDING_FEATURES
    held = kg.triples.filter(relation__external_id="citizen_of").select_related("head", "relation", "tail").first()
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


@pytest.mark.slow
def test_an_unknown_the_kg_cannot_tie_is_resolved_with_the_models_predictions(towns):
    # "P3 was born in a town that lies in <P3's country>": the KG lost where P3 was born, so every town of that
    # country ties alike through "located in"; the structural model's link prediction breaks the tie.
    from verifier.claims.decompose import Decomposition, Named
    from verifier.claims.resolve import PREDICTED, resolve
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

    train_towns(kg)
    model = scoring.loaded(StructuralModel.objects.ready_for(kg))
    predicted = model.predicted(named(Entity, "P3").pk, named(Relation, "born_in").pk, "tail", 5)
    assert len(predicted) == 5 and all(Entity.objects.get(pk=pk).external_id.startswith("T") for pk, _ in predicted)
    assert [p for _, p in predicted] == sorted((p for _, p in predicted), reverse=True)
    with_model = resolve(kg, claim)["unknown_1"]
    # Each tie adds its best score: the KG edge into the country (1.0) and the model's probability for P3's birthplace.
    probability = dict(model.predicted(named(Entity, "P3").pk, named(Relation, "born_in").pk, "tail", PREDICTED))
    assert with_model.entity.external_id in towns_there
    assert with_model.score == pytest.approx(1.0 + probability.get(with_model.entity.pk, 0.0))
    assert with_model.candidates[0][1] >= with_model.candidates[-1][1]


def test_the_budget_counts_the_computing_a_network_got_not_the_time_it_waited_for_a_core():
    """On a machine busy with other work the training process waits for a core: that time is not spent budget."""
    import time

    clock = kge._BudgetClock()
    time.sleep(0.3)  # waiting, as for a core another process holds
    assert clock() < 0.1
    start = time.process_time()
    while time.process_time() - start < 0.3:  # computing
        pass
    assert 0.3 <= clock() <= time.monotonic() - clock.wall


@pytest.mark.slow
def test_a_training_the_budget_ends_while_it_still_improves_says_so_and_how_to_train_longer(towns, caplog):
    """A budget too short for the KG leaves a model weaker than the KG allows. The command and the KG's status line
    say so (a queued training's worker logs the same line)."""
    from django.core.management import call_command

    from verifier.selectors import model_summary

    out = io.StringIO()
    rushed = replace(TINY, eval_every=1, max_minutes=1e-4)  # the first validation already overruns it
    call_command("train_kge", "towns", "--config", json.dumps(asdict(rushed)), "--folds", "2", "--no-progress", stdout=out)
    row = StructuralModel.objects.get(kg=towns[0], status=StructuralModel.Status.READY)
    assert row.metrics["cut_short"] is True and row.metrics["epochs"] == 1
    assert row.metrics["stopped_because"] == "time budget of 0.0001 minutes, the held-out MRR still rising"
    text = out.getvalue()
    assert (f"The 0.0001-minute budget of each network ended the training of structural model #{row.pk} of towns while "
            f"its held-out MRR was still rising (validation MRR {row.metrics['validation']['mrr']:.3f})") in text
    assert """manage.py train_kge towns --config '{"max_minutes": 0.0002}'""" in text
    assert model_summary(row).endswith(", cut short by its time budget")

    queued = request_training(towns[0], config=asdict(rushed), folds=2)  # the same, trained by a worker for the workbench
    with caplog.at_level(logging.WARNING, logger="verifier.tasks"):
        assert train_structural_model(queued.pk) == StructuralModel.Status.READY
    logged = [r.getMessage() for r in caplog.records if r.name == "verifier.tasks"]
    assert logged == [cut_short_warning(StructuralModel.objects.get(pk=queued.pk))]
    assert f"structural model #{queued.pk} of towns" in logged[0]


@pytest.mark.slow
def test_a_retraining_that_did_worse_can_be_rolled_back_to_the_model_it_replaced(towns):
    from django.core.management import CommandError, call_command

    from verifier.selectors import structural_statuses

    kg, _ = towns
    quick = replace(TINY, max_epochs=20, eval_every=20)  # how good the models are does not matter here
    first = train_towns(kg, quick)
    out = io.StringIO()
    call_command("train_kge", "towns", "--config", json.dumps(asdict(quick)), "--folds", "2", "--no-progress", stdout=out)
    second = StructuralModel.objects.ready_for(kg)
    assert second.pk != first.pk
    assert f"It replaces model #{first.pk}; to undo: manage.py train_kge towns --restore {first.pk}" in out.getvalue()
    in_force = ConfidenceModel.objects.get(kg=kg, active=True)
    assert in_force.source == confidence.STRUCTURAL_ALONE, "a KG without labels is weighed by its own calibration"
    assert "manage.py calibrate --kg towns" not in out.getvalue()
    assert FoldNetwork.objects.filter(model=first).count() == 2
    assert gc.get_freeze_count() == 0  # what training froze (docs in kge.train) is collectable again
    out = io.StringIO()
    call_command("train_kge", "towns", "--restore", str(first.pk), stdout=out)
    assert f"#{first.pk} of towns v{kg.version} is ready again" in out.getvalue()
    assert StructuralModel.objects.ready_for(kg).pk == first.pk
    answer = StructuralEvidence(kg).plausibility("P0", "citizen_of", "C7")
    assert isinstance(answer, PlausibilityReport) and answer.model.pk == first.pk
    [status] = structural_statuses([kg.pk])
    assert status.state == "ready" and status.model_id == status.ready_model_id == first.pk
    # A third model supersedes the restored one; the second, replaced before, gives its networks up.
    third = train_towns(kg, quick)
    assert not FoldNetwork.objects.filter(model=second).exists()
    with pytest.raises(CommandError, match=rf"its networks were released. Restorable: #{first.pk} "):
        call_command("train_kge", "towns", "--restore", str(second.pk))
    with pytest.raises(CommandError, match="already the ready model"):
        call_command("train_kge", "towns", "--restore", str(third.pk))


@pytest.mark.slow
def test_a_changed_kg_keeps_its_previous_model_scoring_until_the_new_one_is_ready(towns):
    kg, _ = towns
    first = train_towns(kg, replace(TINY, max_epochs=20, eval_every=20))
    KnowledgeGraph.objects.filter(pk=kg.pk).update(version=F("version") + 1)
    kg.refresh_from_db()
    queued = request_training(kg, reason="KG changed", folds=2)
    assert queued is not None and queued.kg_version == kg.version
    answer = StructuralEvidence(kg).plausibility("P0", "citizen_of", "C1")
    assert isinstance(answer, PlausibilityReport) and answer.model.pk == first.pk  # the earlier version's, meanwhile
    second = train(kg, row=queued)
    assert StructuralEvidence(kg).plausibility("P0", "citizen_of", "C1").model.pk == second.pk
    assert StructuralModel.objects.get(pk=first.pk).status == StructuralModel.Status.SUPERSEDED


@pytest.mark.slow
def test_n3_penalises_the_cubed_moduli_of_what_each_batch_uses_and_shrinks_the_network_as_both_loops_learn(towns):
    kg, _ = towns
    data = training_data(kg, folds=5)
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
        config = replace(TINY, train_type=train_type, max_epochs=60, eval_every=60, negatives=64)
        sizes = {}
        for weight in (0.0, 0.2):
            trained = kge.train(replace(config, regularize_weight=weight), data.train(0), num_entities=data.num_entities,
                                num_relations=data.num_relations, validation=data.stopping(0), known=data.known)
            assert trained.validation["mrr"] > 0.1, (train_type, weight)
            sizes[weight] = float(trained.model.entity_representations[0](indices=None).norm())
        assert sizes[0.2] < 0.85 * sizes[0.0], (train_type, sizes)


def test_embeddings_start_from_a_normal_of_the_chosen_spread():
    small = kge.build_model(replace(TINY, init_std=1e-3), 500, 4)
    assert float(small.entity_representations[0](indices=None).detach().std()) == pytest.approx(1e-3, rel=0.1)
    xavier = kge.build_model(TINY, 500, 4)
    assert float(xavier.entity_representations[0](indices=None).detach().std()) > 0.03


def test_facts_their_types_cannot_corrupt_are_calibrated_on_corruptions_by_the_relations_roles(db):
    """A small dense KG whose entities each play roles of their own (UMLS: 29 of 135 share them) would give its
    calibration almost no false triples by type; the relation's roles corrupt every fact."""
    people = [f"H{i}" for i in range(6)]
    friends = [f"F{i}" for i in range(6)]
    triples = [(h, "likes", f) for i, h in enumerate(people) for f in friends[i:i + 2]]
    triples += [(h, f"owns_{i}", "X") for i, h in enumerate(people)] + [(f, f"drives_{i}", "Y") for i, f in enumerate(friends)]
    source = KGSource("dense", "dense", "", triples=lambda: iter(triples))
    kg = load_source(source, embed=False).kg
    model = StructuralModel.objects.create(kg=kg, kg_version=kg.version)
    likes = [_ids(kg, *t) for t in triples if t[1] == "likes"]
    assert corruptions(kg, likes) == []  # no two entities share a signature
    fit_set = structural_fit_set(model)
    assert fit_set.source.startswith("facts the KG states and corruptions of them (entities in the same role")
    assert fit_set.labels.sum() == len(triples) and (~fit_set.labels).sum() > 0
    in_kg = set(kg.triples.values_list("head_id", "relation_id", "tail_id"))
    assert all(row[:3] not in in_kg for row in fit_set.rows if not row[3])


