"""The audit's view of a KG version, built once per process: its triples as indices, the graph's statistics
(verifier/kg_audit/graph.py), how related its ends' names are (verifier/kg_audit/names.py) and, where the KG has
a ready structural model, what the network of each triple's fold — the one that never learnt it — makes of it.
``AuditView.features`` describes any batch of triples (the KG's own, or corruptions) by the same FEATURES.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass
from functools import partial

import numpy as np
import torch

from verifier.kg_audit.graph import GRAPH_FEATURES, GraphIndex
from verifier.kg_audit.names import NameContext, name_vectors
from verifier.models import Entity, KnowledgeGraph, Relation, StructuralModel
from verifier.structure import scoring
from verifier.structure.dataset import kg_triples
from verifier.structure.folds import fold_of

EMBEDDING_FEATURES = ["tail_log_p", "head_log_p", "tail_rank", "head_rank"]
# The cosine of the ends' "label, description" embeddings, and of each end's with its peers' (NameContext).
NAME_FEATURES = ["name_similarity", *NameContext.FEATURES]
FEATURES = GRAPH_FEATURES + NAME_FEATURES + EMBEDDING_FEATURES
# Above this many entities a triple's score is compared with a fixed sample of them, not with every one.
FULL_SOFTMAX_ENTITIES = 50_000
SAMPLED_ENTITIES = 1024
BATCH = 256


@dataclass
class AuditView:
    kg_id: int
    kg_version: int
    model_id: int | None
    entity_rows: np.ndarray  # entity row id of each index, ascending
    relation_rows: np.ndarray
    triples: np.ndarray  # every KG triple as row ids, in the audit's order (sorted)
    graph: GraphIndex
    loaded: scoring.LoadedModel | None
    names: np.ndarray | None = None  # each entity index's unit name vector (NaN: unnamed), None: no names
    peers: NameContext | None = None

    def to_indices(self, rows: np.ndarray) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.int64).reshape(-1, 3)
        return np.stack([np.searchsorted(self.entity_rows, rows[:, 0]), np.searchsorted(self.relation_rows, rows[:, 1]),
                         np.searchsorted(self.entity_rows, rows[:, 2])], axis=1)

    def features(self, rows: np.ndarray) -> np.ndarray:
        """(n, len(FEATURES)) for row-id triples; the embedding's columns are NaN without a structural model, a
        triple's name similarity NaN when an end has no name."""
        rows = np.asarray(rows, dtype=np.int64).reshape(-1, 3)
        indices = self.to_indices(rows)
        described = self.graph.describe(indices)
        similarity = np.full((len(rows), len(NAME_FEATURES)), np.nan, dtype=np.float32)
        if self.names is not None and len(rows):
            heads, tails = self.names[indices[:, 0]], self.names[indices[:, 2]]
            similarity[:, 0] = np.einsum("ij,ij->i", heads.astype(np.float32), tails.astype(np.float32))
            similarity[:, 1:] = self.peers.describe(indices, described.in_kg)
        embedding = np.full((len(rows), len(EMBEDDING_FEATURES)), np.nan, dtype=np.float32)
        if self.loaded is not None and len(rows):
            embedding = self._embedding(rows)
        return np.hstack([described.features, similarity, embedding])

    def _embedding(self, rows: np.ndarray) -> np.ndarray:
        """Each triple by the network of its fold: log p(tail | head, relation) and log p(head | tail, relation⁻¹) over
        every entity (a fixed sample of them in a KG of very many), and the share of entities scored above each end."""
        loaded = self.loaded
        out = np.full((len(rows), len(EMBEDDING_FEATURES)), np.nan, dtype=np.float32)
        model_index = np.stack([np.searchsorted(loaded.entity_rows, rows[:, 0]), np.searchsorted(loaded.relation_rows, rows[:, 1]),
                                np.searchsorted(loaded.entity_rows, rows[:, 2])], axis=1)
        known = (model_index[:, [0, 2]] < len(loaded.entity_rows)).all(axis=1) & (model_index[:, 1] < len(loaded.relation_rows))
        known[known] &= (loaded.entity_rows[model_index[known, 0]] == rows[known, 0]) & \
            (loaded.entity_rows[model_index[known, 2]] == rows[known, 2]) & \
            (loaded.relation_rows[model_index[known, 1]] == rows[known, 1])  # entities newer than the model stay NaN
        folds = fold_of(rows, len(loaded.networks))
        entities = len(loaded.entity_rows)
        sample = None
        if entities > FULL_SOFTMAX_ENTITIES:
            sample = torch.as_tensor(np.sort(np.random.default_rng(0).choice(entities, SAMPLED_ENTITIES, replace=False)))
        with torch.inference_mode():
            for fold, network in enumerate(loaded.networks):
                positions = np.flatnonzero(known & (folds == fold))
                for start in range(0, len(positions), BATCH):
                    at = positions[start:start + BATCH]
                    batch = torch.as_tensor(model_index[at], dtype=torch.long)
                    out[at] = _side_scores(network, batch, sample, entities)
        return out


def _side_scores(network, batch: torch.Tensor, sample: torch.Tensor | None, entities: int) -> np.ndarray:
    """[tail log p, head log p, tail rank share, head rank share] of each (h, r, t) index row of ``batch``. Heads are
    scored as the network was trained to predict them: tails of the inverse relation (PyKEEN's predict_h)."""
    columns = []
    for side in ("tail", "head"):
        if side == "tail":
            target = batch[:, 2]
            score = partial(lambda candidates, query: network.predict_t(query, tails=candidates), query=batch[:, :2])
        else:
            target = batch[:, 0]
            score = partial(lambda candidates, query: network.predict_h(query, heads=candidates), query=batch[:, 1:])
        if sample is None:
            scores = score(None)
            own = scores.gather(1, target[:, None])
            log_norm = torch.logsumexp(scores, dim=1, keepdim=True)
        else:  # the target against a fixed sample, its log-normaliser scaled up to every entity
            scores = score(sample)
            own = score(target[:, None])  # each row against its own target
            log_norm = torch.logsumexp(torch.cat([scores, own], dim=1), dim=1, keepdim=True) + np.log(entities / (len(sample) + 1))
        columns += [(own - log_norm)[:, 0], (scores > own).float().mean(dim=1)]
    tail_lp, tail_above, head_lp, head_above = columns
    return torch.stack([tail_lp, head_lp, tail_above, head_above], dim=1).float().numpy()


def primary_types(kg: KnowledgeGraph, entity_rows: np.ndarray) -> np.ndarray | None:
    """Each entity's most common declared type (over the KG) as a small int, -1 without one; None for a KG whose
    entities declare no types."""
    declared = dict(Entity.objects.filter(kg=kg).exclude(types=[]).values_list("pk", "types"))
    if not declared:
        return None
    frequency = Counter(t for types in declared.values() for t in types)
    codes = {t: i for i, (t, _) in enumerate(frequency.most_common())}
    out = np.full(len(entity_rows), -1, dtype=np.int64)
    for position, pk in enumerate(entity_rows.tolist()):
        types = declared.get(pk)
        if types:
            out[position] = codes[max(types, key=lambda t: (frequency[t], t))]
    return out


_VIEWS: dict[int, AuditView] = {}
_LOCK = threading.Lock()


def view_of(kg: KnowledgeGraph, model: StructuralModel | None) -> AuditView:
    """The KG's audit view for its current version and ``model``, built once per process (the last KG's kept)."""
    key = (kg.pk, kg.version, model.pk if model else None)
    with _LOCK:
        cached = _VIEWS.get(kg.pk)
        if cached is not None and (cached.kg_id, cached.kg_version, cached.model_id) == key:
            return cached
        entity_rows = np.array(sorted(Entity.objects.filter(kg=kg).values_list("pk", flat=True)), dtype=np.int64)
        relation_rows = np.array(sorted(Relation.objects.filter(kg=kg).values_list("pk", flat=True)), dtype=np.int64)
        rows = kg_triples(kg)
        rows = rows[np.lexsort((rows[:, 2], rows[:, 1], rows[:, 0]))] if len(rows) else rows
        view = AuditView(kg.pk, kg.version, model.pk if model else None, entity_rows, relation_rows, rows,
                         GraphIndex(np.zeros((0, 3), dtype=np.int64), len(entity_rows), len(relation_rows)), None)
        view.graph = GraphIndex(view.to_indices(rows), len(entity_rows), len(relation_rows), primary_types(kg, entity_rows))
        view.loaded = scoring.loaded(model) if model is not None else None
        view.names = name_vectors(kg, entity_rows)
        if view.names is not None:
            view.peers = NameContext(view.graph.triples, view.names, len(relation_rows))
        _VIEWS.clear()
        _VIEWS[kg.pk] = view
        return view
