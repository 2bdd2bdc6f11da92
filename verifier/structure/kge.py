"""Knowledge-graph embeddings with PyKEEN: configuration, training with validation, (de)serialisation.

The default follows the CoDEx authors' tuned link-prediction set-up, scaled to two CPU cores: ComplEx
with reciprocal relations (each triple also trains its inverse, so heads are predicted as tails of the
inverse relation), each training row scored against all entities under a softmax cross-entropy (KvsAll
or 1vsAll rows: TRAIN_TYPES), entity and relation dropout, Adam.
Training runs in chunks of epochs; after each chunk filtered MRR on the validation triples is measured,
the best weights are kept, and training stops when MRR stops improving, at the epoch limit or at the time
budget.
"""

from __future__ import annotations

import gc
import io
import logging
import os
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields

import numpy as np
import torch

from verifier.structure import malloc_tuning

logger = logging.getLogger(__name__)

# PyKEEN's interaction name for each model we offer; ComplEx's vectors are stored as real pairs.
INTERACTIONS = {"ComplEx": "complex", "DistMult": "distmult", "RESCAL": "rescal"}
COMPLEX_MODELS = {"ComplEx"}
MATRIX_RELATIONS = {"RESCAL"}  # a relation is a dim × dim matrix
OPTIMIZERS = {"Adam": torch.optim.Adam, "Adagrad": torch.optim.Adagrad}
# How a batch is scored against every entity (Ruffinelli et al.'s names): KvsAll — one row per (entity, relation)
# with all its known answers as targets (PyKEEN's LCWA loop); 1vsAll — one row per triple and one per its
# inverse, the single answer against every entity (Lacroix et al.'s objective; `_one_vs_all_loop`).
# "sampled" — 1vsAll's rows, each scored against the answers of its batch and ``negatives`` entities drawn for the
# batch (a sampled softmax, `_sampled_loop`): one matrix product per batch whatever the KG's size, so its cost
# grows with the triples alone, not with triples × entities — what trains a KG of many thousands of entities.
TRAIN_TYPES = ("KvsAll", "1vsAll", "sampled")
# The number format of training's products. bfloat16 (autocast: the weights, the optimizer and the loss stay
# float32) makes scoring a batch against every entity 1.5–2 times faster on CPUs with bfloat16 instructions
# (AVX512-BF16, AMX); validation and every score the tools give are float32 whatever was chosen.
PRECISIONS = ("float32", "bfloat16")
# How the learning rate moves: "plateau" — multiplied by lr_decay after each validation without a better MRR;
# "linear" — falls with every batch from learning_rate towards zero at the end of training (the epoch limit or
# the time budget, whichever comes first), so a budgeted training ends with small, settling steps.
LR_SCHEDULES = ("plateau", "linear")

Progress = Callable[[float, str], None]  # (fraction of training done, what is happening)


@dataclass(frozen=True)
class KGEConfig:
    model: str = "ComplEx"
    dim: int = 256  # complex dimensions for ComplEx (512 real numbers per vector)
    optimizer: str = "Adam"
    train_type: str = "KvsAll"
    learning_rate: float = 1e-3
    batch_size: int = 512
    entity_dropout: float = 0.1
    relation_dropout: float = 0.05
    label_smoothing: float = 0.0
    regularize_weight: float = 0.0  # N3: the cubed moduli of the embeddings each batch uses (`_n3`)
    init_std: float = 0.0  # the embeddings' initial standard deviation (normal); 0: Xavier-normal
    max_epochs: int = 300
    eval_every: int = 20
    patience: int = 2  # evaluations without a better MRR before stopping
    lr_schedule: str = "plateau"
    lr_decay: float = 1.0  # "plateau": the learning rate is multiplied by this after an evaluation without a better MRR
    max_minutes: float = 15.0  # the budget of one network (a structural model trains one per fold)
    seed: int = 0
    precision: str = "float32"
    negatives: int = 2048  # "sampled": entities drawn per batch, beside the batch's own answers

    def __post_init__(self) -> None:
        if self.model not in INTERACTIONS:
            raise ValueError(f"unknown KGE model {self.model!r}; one of {', '.join(INTERACTIONS)}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer {self.optimizer!r}; one of {', '.join(OPTIMIZERS)}")
        if self.train_type not in TRAIN_TYPES:
            raise ValueError(f"unknown train_type {self.train_type!r}; one of {', '.join(TRAIN_TYPES)}")
        if self.lr_schedule not in LR_SCHEDULES:
            raise ValueError(f"unknown lr_schedule {self.lr_schedule!r}; one of {', '.join(LR_SCHEDULES)}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"unknown precision {self.precision!r}; one of {', '.join(PRECISIONS)}")
        if self.regularize_weight < 0 or self.init_std < 0:
            raise ValueError("regularize_weight and init_std must not be negative")
        if self.dim < 1 or self.max_epochs < 1 or self.eval_every < 1 or self.batch_size < 1 or self.negatives < 1:
            raise ValueError("dim, max_epochs, eval_every, batch_size and negatives must be positive")
        if self.max_minutes <= 0:
            raise ValueError("max_minutes must be positive")
        if not 0 < self.lr_decay <= 1:
            raise ValueError("lr_decay must be in (0, 1]")

    @classmethod
    def from_dict(cls, data: dict) -> KGEConfig:
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"unknown KGE setting(s) {', '.join(unknown)}; known: {', '.join(sorted(names))}")
        return cls(**data)

    def to_dict(self) -> dict:
        return asdict(self)


def bfloat16_native() -> bool:
    """Whether this CPU multiplies bfloat16 in hardware (AVX512-BF16 or AMX); elsewhere bfloat16 is emulated and
    slower than float32."""
    cpu = torch.cpu
    return any(getattr(cpu, probe, lambda: False)() for probe in ("_is_avx512_bf16_supported", "_is_amx_tile_supported"))


def precision(config: KGEConfig):
    """The context training's batches run in: bfloat16 autocast when ``config.precision`` asks for it."""
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=config.precision == "bfloat16")


# Scores one training epoch computes, per real dimension, beyond which a KG trains against sampled negatives: the
# all-entities rows of 1vsAll cost rows × entities (CoDEx-S: 1.3e8; WN18RR and FB15k-237 about 8e9).
ALL_ENTITIES_LIMIT = 2e9


def device() -> torch.device:
    """Where networks train: the first GPU PyTorch sees, else the CPU."""
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def budget_minutes(num_triples: int, folds: int) -> float:
    """The wall-clock budget of one network: the whole model (``folds`` networks) gets 3 minutes plus one per
    12,000 triples, at most an hour — a 100,000-triple KG trains in 11 minutes on two cores (a faster machine or a
    GPU fits more epochs into the same minutes), so it is verified within a quarter of an hour of its upload."""
    return round(min(60.0, 3.0 + num_triples / 12_000) / folds, 2)


def default_config(num_triples: int, num_entities: int, *, folds: int = 1) -> KGEConfig:
    """The default network for a KG of this size, trained ``folds`` times (docs/reference/structural-model.md)."""
    number_format = "bfloat16" if bfloat16_native() else "float32"  # faster where the CPU multiplies bfloat16 itself
    minutes = budget_minutes(num_triples, folds)
    if 2 * num_triples * num_entities > ALL_ENTITIES_LIMIT:
        # every triple against sampled negatives, validated after every epoch, the step falling to zero at the budget
        return KGEConfig(dim=256, train_type="sampled", negatives=2048, learning_rate=3e-3, batch_size=1024,
                         entity_dropout=0.079, relation_dropout=0.056, max_epochs=300, eval_every=2, patience=3,
                         lr_decay=0.5, max_minutes=minutes, precision=number_format)
    # the CoDEx authors' 1vsAll set-up (their dropout, Adam), with the step halved after each validation without a
    # better MRR; the width shrinks with the KG so that the epochs still fit the budget
    dim = 512 if num_triples * num_entities <= 1e8 else 256
    return KGEConfig(dim=dim, train_type="1vsAll", learning_rate=1e-3 if dim > 256 else 3e-3, batch_size=1024,
                     entity_dropout=0.079, relation_dropout=0.056, max_epochs=300, eval_every=5, patience=3, lr_decay=0.5,
                     max_minutes=minutes, precision=number_format)


def _pykeen():
    """Import PyKEEN on first use (web processes never need it) and keep it quiet: its package sets its own
    logger to INFO on import, reporting every representation it builds; KGV reports progress itself."""
    import pykeen

    logging.getLogger(pykeen.__name__).setLevel(logging.WARNING)
    return pykeen


def _kg_info(num_entities: int, num_relations: int):
    _pykeen()
    from pykeen.triples import KGInfo

    return KGInfo(num_entities=num_entities, num_relations=num_relations, create_inverse_triples=True)


def build_model(config: KGEConfig, num_entities: int, num_relations: int):
    from pykeen.models import ERModel

    width = 2 * config.dim if config.model in COMPLEX_MODELS else config.dim
    relation_shape = (width, width) if config.model in MATRIX_RELATIONS else width
    initial = {"initializer": "normal_", "initializer_kwargs": {"std": config.init_std}} if config.init_std \
        else {"initializer": "xavier_normal_"}
    torch.manual_seed(config.seed)
    return ERModel(
        triples_factory=_kg_info(num_entities, num_relations),
        interaction=INTERACTIONS[config.model],
        loss="crossentropy",
        entity_representations_kwargs={"shape": width, **initial, "dropout": config.entity_dropout or None},
        relation_representations_kwargs={"shape": relation_shape, **initial,
                                         "dropout": config.relation_dropout or None},
        random_seed=config.seed,
    )


class OneQuestion:
    """Every entity's score for one question (anchor, relation, ?), as PyKEEN's ``predict_t`` / ``predict_h``
    give it, in a fraction of their time: the tools ask one question at a time, where PyKEEN's batched
    interaction broadcasts the query against every entity (about 2 ms on FB15k-237's 14,951 entities).

    Every offered interaction (INTERACTIONS: ComplEx, DistMult, RESCAL) is linear in the tail's vector, so
    score(anchor, relation, e) = q · e for a query vector q: PyKEEN's own interaction evaluated on the basis
    vectors gives q (a few hundred tiny scores), and one product with the entity matrix, kept transposed so
    that the product streams it row by row, gives every score (about 0.3 ms)."""

    def __init__(self, model):
        with torch.inference_mode():
            entities = model.entity_representations[0](indices=None)
            self._by_column = entities.T.contiguous()  # (width, entities)
            self._relations = model.relation_representations[0](indices=None)
            self._basis = torch.eye(entities.shape[-1], dtype=entities.dtype)
        self._interaction = model.interaction
        self._inverter = model.relation_inverter

    @torch.inference_mode()
    def scores(self, anchor: int, relation: int, *, inverse: bool) -> torch.Tensor:
        """Scores of every entity as the tail of (anchor, relation) — of its inverse when ``inverse``: the heads
        of (?, relation, anchor), as the reciprocal model predicts them."""
        representation = int(self._inverter.map(torch.tensor([[0, relation]]), index=1, invert=inverse)[0, 1])
        query = self._interaction(h=self._by_column[:, anchor][None], r=self._relations[representation][None], t=self._basis)
        return query @ self._by_column


def triples_factory(triples: np.ndarray, num_entities: int, num_relations: int):
    from pykeen.triples import CoreTriplesFactory

    return CoreTriplesFactory.create(torch.as_tensor(triples, dtype=torch.long), num_entities=num_entities,
                                     num_relations=num_relations, create_inverse_triples=True)


def link_prediction(model, triples: np.ndarray, known: np.ndarray) -> dict:
    """Filtered rank metrics of predicting each triple's head and tail (both sides averaged; the MRR of each side
    apart as well: heads are answered by the inverse relations, tails by the relations)."""
    _pykeen()
    from pykeen.evaluation import RankBasedEvaluator

    if len(triples) == 0:
        return {"mrr": 0.0, "hits_at_1": 0.0, "hits_at_10": 0.0, "head_mrr": 0.0, "tail_mrr": 0.0, "triples": 0}
    model.eval()
    evaluator = RankBasedEvaluator(filtered=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = evaluator.evaluate(model, torch.as_tensor(triples, dtype=torch.long),
                                    additional_filter_triples=[torch.as_tensor(known, dtype=torch.long)],
                                    batch_size=256, use_tqdm=False)
    return {"mrr": round(float(result.get_metric("both.realistic.inverse_harmonic_mean_rank")), 4),
            "hits_at_1": round(float(result.get_metric("both.realistic.hits_at_1")), 4),
            "hits_at_10": round(float(result.get_metric("both.realistic.hits_at_10")), 4),
            "head_mrr": round(float(result.get_metric("head.realistic.inverse_harmonic_mean_rank")), 4),
            "tail_mrr": round(float(result.get_metric("tail.realistic.inverse_harmonic_mean_rank")), 4),
            "triples": int(len(triples))}


@dataclass
class Trained:
    model: object
    epochs: int
    seconds: float
    validation: dict
    history: list[dict] = field(default_factory=list)
    stopped_because: str = ""
    cut_short: bool = False  # the time budget ended training while the held-out MRR was still rising


def train(config: KGEConfig, triples: np.ndarray, *, num_entities: int, num_relations: int, validation: np.ndarray,
          known: np.ndarray, progress: Progress | None = None) -> Trained:
    """Train on ``triples`` (indices) and keep the weights with the best filtered MRR on ``validation``.
    ``known``: every true triple (filtered out of the rankings)."""
    progress = progress or (lambda fraction, stage: None)
    # Every core this process is given while training: a worker runs torch single-threaded otherwise (verifier/memory/encoder.py).
    threads = torch.get_num_threads()
    torch.set_num_threads(len(os.sched_getaffinity(0)) or 1)
    # PyKEEN runs a full gc.collect() after every epoch. In a process that has loaded Django, the encoder and
    # the KG, each one walks hundreds of thousands of objects (0.1–0.4 s, against epochs of 2 s on CoDEx-S);
    # frozen, they are left out, and the collections see only what training allocates.
    gc.freeze()
    try:
        with malloc_tuning.reused_heap():  # large score tensors reused, not mapped afresh at every step (malloc_tuning.py)
            return _train(config, triples, num_entities=num_entities, num_relations=num_relations,
                          validation=validation, known=known, progress=progress)
    finally:
        gc.unfreeze()
        torch.set_num_threads(threads)


class _OutOfTime(Exception):
    """The time budget ran out in the middle of the epochs between two validations."""

    def __init__(self, epoch: int):
        self.epoch = epoch


class _BudgetClock:
    """Seconds of a network's budget spent: the wall-clock time, or the CPU time the process got when that is less.
    On a machine to itself the budget is wall-clock minutes; on one busy with other work (verifications, the local
    model) a network still gets its minutes of computing, later, instead of a few epochs."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.monotonic(), time.process_time()

    def __call__(self) -> float:
        return min(time.monotonic() - self.wall, time.process_time() - self.cpu)


def _heartbeat(report: Callable[[int], None], clock: _BudgetClock, budget: float):
    """A PyKEEN training callback reporting after every batch (the job's reporter throttles what it writes), so
    the epochs between two validations — a quarter of an hour on FB15k-237 — never look like a dead job; once the
    ``budget`` (seconds of ``clock``) is spent it ends training at once, so a slow machine never overruns the
    budget by a chunk of epochs."""
    from pykeen.training import TrainingCallback

    class Heartbeat(TrainingCallback):
        def post_batch(self, epoch: int, batch, **kwargs) -> None:
            report(epoch)
            if clock() > budget:
                raise _OutOfTime(epoch)

    return Heartbeat()


def _linear_decay(config: KGEConfig, clock: _BudgetClock):
    """A PyKEEN training callback setting the learning rate before every optimizer step: learning_rate times
    the part of training still ahead, by batches against the epoch limit or by minutes against the budget,
    whichever is further along (the batches of an epoch are known once the first one has run)."""
    from pykeen.training import TrainingCallback

    class LinearDecay(TrainingCallback):
        batches, per_epoch = 0, None

        def pre_step(self, **kwargs) -> None:
            done = clock() / (config.max_minutes * 60)
            if self.per_epoch:
                done = max(done, self.batches / (self.per_epoch * config.max_epochs))
            for group in self.optimizer.param_groups:
                group["lr"] = config.learning_rate * max(0.0, 1.0 - done)
            self.batches += 1

        def post_epoch(self, epoch: int, epoch_loss: float, **kwargs) -> None:
            self.per_epoch = self.per_epoch or self.batches

    return LinearDecay()


def _n3(model, rows: torch.Tensor, weight: float) -> torch.Tensor:
    """Lacroix et al.'s N3 regulariser: ``weight`` times the cubed moduli of the embeddings a batch uses — each
    row's anchor and relation, and its answer when the row has one — summed and divided by the rows. An entity
    is penalised as often as training uses it, unlike a penalty on the whole table; the weights are taken
    before dropout. A complex coordinate's modulus is that of its (real, imaginary) pair."""
    entities, relations = model.entity_representations[0], model.relation_representations[0]
    factors = [entities._plain_forward(indices=rows[:, 0]), relations._plain_forward(indices=rows[:, 1])]
    if rows.shape[1] > 2:
        factors.append(entities._plain_forward(indices=rows[:, 2]))
    paired = model.interaction.is_complex
    total = sum((f.view(len(rows), -1, 2).norm(dim=-1) if paired else f.abs()).pow(3).sum() for f in factors)
    return weight * total / len(rows)


def _one_vs_all_loop(model, factory, optimizer, regularize_weight: float, sampled: int = 0):
    """PyKEEN's symmetric LCWA loop (one row per triple, Lacroix et al.), for a model with reciprocal relations:
    the loop scores heads by broadcasting every entity through the interaction — about 150 times slower than
    scoring tails, and it would leave the inverse relations untrained — so here each triple and its inverse are
    two rows whose tails are scored, exactly as the reciprocal model predicts heads. Batching, the optimizer
    steps and the callbacks stay PyKEEN's. With ``sampled``, each batch's rows are scored against the batch's own
    answers and that many entities drawn uniformly (a sampled softmax) instead of every entity."""
    from pykeen.training import SymmetricLCWATrainingLoop
    from torch.nn import functional
    from torch.utils.data import DataLoader, TensorDataset

    class OneVsAll(SymmetricLCWATrainingLoop):
        def _create_training_data_loader(self, triples_factory, sampler, **kwargs):
            assert sampler is None
            triples, inverter = triples_factory.mapped_triples, self.model.relation_inverter
            rows = torch.cat([inverter.map(batch=triples), inverter.map(batch=triples, invert=True).flip(1)])
            return DataLoader(dataset=TensorDataset(rows), **kwargs)

        def _process_batch(self, batch, start, stop, label_smoothing=0.0, slice_size=None):
            rows = batch[0][start:stop].to(device=self.model.device)
            if sampled and sampled < self.model.num_entities:
                drawn = torch.randint(self.model.num_entities, (sampled,), device=rows.device)
                candidates, answers = torch.unique(torch.cat([rows[:, 2], drawn]), return_inverse=True)
                scores = self.model.score_t(hr_batch=rows[:, :2], mode=self.mode, tails=candidates)
                labels = functional.one_hot(answers[:len(rows)], num_classes=len(candidates)).float()
                num_classes = len(candidates)
            else:
                scores = self.model.score_t(hr_batch=rows[:, :2], slice_size=slice_size, mode=self.mode)
                labels = functional.one_hot(rows[:, 2], num_classes=self.model.num_entities).float()
                num_classes = self.model.num_entities
            loss = self.loss.process_lcwa_scores(predictions=scores, labels=labels, label_smoothing=label_smoothing,
                                                 num_entities=num_classes)
            return loss + _n3(self.model, rows, regularize_weight) if regularize_weight else loss

    return OneVsAll(model=model, triples_factory=factory, optimizer=optimizer)


def training_loop(config: KGEConfig, model, factory, optimizer):
    """The PyKEEN loop that trains ``model`` by ``config.train_type``, with the N3 penalty when configured."""
    from pykeen.training import LCWATrainingLoop

    if config.train_type == "1vsAll":
        return _one_vs_all_loop(model, factory, optimizer, config.regularize_weight)
    if config.train_type == "sampled":
        return _one_vs_all_loop(model, factory, optimizer, config.regularize_weight, sampled=config.negatives)
    if not config.regularize_weight:
        return LCWATrainingLoop(model=model, triples_factory=factory, optimizer=optimizer, target="tail")

    class KvsAll(LCWATrainingLoop):
        def _process_batch(self, batch, start, stop, label_smoothing=0.0, slice_size=None):
            return super()._process_batch(batch, start, stop, label_smoothing, slice_size) \
                + _n3(self.model, batch["pairs"][start:stop].to(device=self.model.device), config.regularize_weight)

    return KvsAll(model=model, triples_factory=factory, optimizer=optimizer, target="tail")


def _train(config: KGEConfig, triples: np.ndarray, *, num_entities: int, num_relations: int, validation: np.ndarray,
           known: np.ndarray, progress: Progress) -> Trained:
    model = build_model(config, num_entities, num_relations).to(device())
    factory = triples_factory(triples, num_entities, num_relations)
    optimizer = OPTIMIZERS[config.optimizer](model.parameters(), lr=config.learning_rate)
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode="max", factor=config.lr_decay, patience=0) \
        if config.lr_schedule == "plateau" and config.lr_decay < 1 else None
    loop = training_loop(config, model, factory, optimizer)
    clock = _BudgetClock()
    schedule = [_linear_decay(config, clock)] if config.lr_schedule == "linear" else []
    best = Trained(model, 0, 0.0, {"mrr": -1.0})
    best_state = None
    epochs, stale, history = 0, 0, []
    budget = config.max_minutes * 60
    progress(0.0, f"epoch 0/{config.max_epochs}, first validation after {min(config.eval_every, config.max_epochs)} epochs")
    out_of_time = False
    while epochs < config.max_epochs:
        chunk = min(config.eval_every, config.max_epochs - epochs)
        try:
            with warnings.catch_warnings(), precision(config):
                warnings.simplefilter("ignore")
                loop.train(triples_factory=factory, num_epochs=epochs + chunk, batch_size=config.batch_size,
                           label_smoothing=config.label_smoothing, continue_training=epochs > 0, use_tqdm=False,
                           callbacks=[*schedule, _heartbeat(lambda epoch, until=epochs + chunk: progress(
                               min(1.0, max((epoch - 1) / config.max_epochs, clock() / budget)),
                               f"epoch {epoch}/{config.max_epochs}, next validation after epoch {until}"),
                               clock, budget)])
            epochs += chunk
        except _OutOfTime as stopped:  # mid-chunk: the epochs begun count, the last one partly trained
            epochs, out_of_time = stopped.epoch, True
        scores = link_prediction(model, validation, known)
        elapsed, wall = clock(), time.monotonic() - clock.wall
        history.append({"epoch": epochs, "minutes": round(wall / 60, 2), "lr": optimizer.param_groups[0]["lr"], **scores})
        logger.info("KGE epoch %s: validation MRR %.4f (%.1f min)", epochs, scores["mrr"], wall / 60)
        if scores["mrr"] > best.validation["mrr"]:
            best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
            best.epochs, best.validation, stale = epochs, scores, 0
        else:
            stale += 1
        if plateau is not None:
            plateau.step(scores["mrr"])
        progress(min(1.0, max(epochs / config.max_epochs, elapsed / budget)),
                 f"epoch {epochs}/{config.max_epochs}, held-out MRR {scores['mrr']:.3f}")
        if stale >= config.patience:
            best.stopped_because = f"validation MRR did not improve for {stale} evaluations"
            break
        if out_of_time or elapsed + elapsed / epochs * min(config.eval_every, config.max_epochs - epochs) > budget:
            best.cut_short = best.epochs == epochs
            best.stopped_because = f"time budget of {config.max_minutes:g} minutes" + (
                ", the held-out MRR still rising" if best.cut_short else "")
            break
    else:
        best.stopped_because = f"epoch limit {config.max_epochs}"
    if best_state is not None:
        model.load_state_dict(best_state)
    model.to("cpu").eval()  # scored on the CPU by the tools, wherever it trained
    best.seconds, best.history = time.monotonic() - clock.wall, history
    return best


def dump(model) -> bytes:
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    return buffer.getvalue()


def load(config: KGEConfig, weights: bytes, num_entities: int, num_relations: int):
    model = build_model(config, num_entities, num_relations)
    model.load_state_dict(torch.load(io.BytesIO(weights), weights_only=True))
    model.eval()
    return model
