"""What the entities' own text says about a triple: description neighbours and mentions.

Two signals the graph's embedding misses, read from the text a KG ships with its entities (short
descriptions, encyclopedia passages):

- **Description neighbours.** Among the entities whose text reads most like the head's (TF-IDF cosine,
  scikit-learn) and that have the relation, how many — weighted by that similarity — hold the claimed
  tail? Ten people described like an American actor say more about a citizenship or an occupation than
  the head's few edges. The same from the tail's side: do the entities described like the tail have the
  head? An entity is never its own neighbour, so the triple under test is never counted.
- **Mentions.** Does the head's text name the tail (label or alias), does the tail's text name the head,
  and what share of the tail label's content words occur in the head's text ("rock music" → "rock")?

The five FEATURES join the embedding's in the plausibility calibration (verifier/structure/scoring.py),
where each relation weighs them as its labelled triples say: a mention settles an occupation more often
than a citizenship. They matter most where a KG ships text about its entities (encyclopedia passages) and
the graph alone says little about an entity.
"""

from __future__ import annotations

import math
import re
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer

from verifier.models import Entity, Passage, Relation
from verifier.structure.dataset import kg_triples

NEIGHBOURS = 10
VOTE_FLOOR = 0.02  # the log of a share is taken with this floor: "none of ten" is strong, not infinite, evidence
FEATURES = ["log_vote_tail", "log_vote_head", "tail_named", "head_named", "tail_words"]
FUNCTION_WORDS = frozenset({"of", "the", "a", "an", "in", "for", "to", "by", "and", "or", "is", "at", "on", "with", "from", "as"})
GENERIC_TAIL_WORDS = frozenset({"music", "people", "language", "languages"})  # "rock music": only "rock" says which


def entity_names(label: str, aliases: list[str]) -> list[str]:
    """The ways a text names an entity: its label, its aliases longer than two characters, and each without a
    qualifier ("Paris, Texas" → "Paris"), longest first."""
    names = {label} | {a for a in aliases if len(a) > 2}
    names |= {re.split(r"[,(]", n)[0].strip() for n in list(names) if n}
    return sorted((n for n in names if n and len(n) > 1), key=len, reverse=True)


def mention_pattern(names: list[str]) -> re.Pattern | None:
    return re.compile(r"\b(" + "|".join(re.escape(n) for n in names) + r")\b", re.IGNORECASE) if names else None


def content_words(label: str, generic: frozenset[str] = frozenset()) -> list[str]:
    """The words of a label that say something (longer than two letters, not function words, not ``generic``)."""
    return [w for w in re.findall(r"[a-z]+", label.lower()) if len(w) > 2 and w not in FUNCTION_WORDS and w not in generic]


@dataclass
class Vote:
    share: float  # similarity-weighted share of the neighbours that hold the value
    neighbours: list[tuple[int, float, bool]] = field(default_factory=list)  # (entity row, similarity, holds it)

    @property
    def holding(self) -> list[int]:
        return [row for row, _, holds in self.neighbours if holds]


@dataclass
class Described:
    tail_vote: Vote  # the head's neighbours: do they have the tail?
    head_vote: Vote  # the tail's neighbours: do they have the head?
    tail_named: bool  # the head's text names the tail
    head_named: bool  # the tail's text names the head
    tail_words: float  # share of the tail label's content words in the head's text

    def features(self) -> list[float]:
        return [math.log(self.tail_vote.share + VOTE_FLOOR), math.log(self.head_vote.share + VOTE_FLOOR),
                float(self.tail_named), float(self.head_named), self.tail_words]


class DescriptionIndex:
    """The entities' texts as TF-IDF vectors and the KG's values per (head, relation) and (relation, tail), by
    entity and relation row ids, with the external ids of those rows. Built once per KG version and process
    (``index_for``)."""

    def __init__(self, kg_id: int):
        entities = list(Entity.objects.filter(kg_id=kg_id).order_by("pk").values_list("pk", "label", "description", "aliases",
                                                                                       "external_id"))
        passages: dict[int, list[str]] = defaultdict(list)
        for entity, text in Passage.objects.filter(kg_id=kg_id).values_list("entity_id", "text"):
            passages[entity].append(text)
        self.position = {pk: i for i, (pk, *_) in enumerate(entities)}
        self.rows = [pk for pk, *_ in entities]
        self.labels = {pk: label or "" for pk, label, *_ in entities}
        self.aliases = {pk: list(aliases or []) for pk, _, _, aliases, _ in entities}
        self.external_ids = {pk: external for pk, *_, external in entities}
        self.entity_row = {external: pk for pk, *_, external in entities}
        self.relation_row = dict(Relation.objects.filter(kg_id=kg_id).values_list("external_id", "pk"))
        self.texts = [" ".join([description or "", *passages[pk]]).strip() for pk, _, description, *_ in entities]
        try:
            self.vectors = TfidfVectorizer(sublinear_tf=True, min_df=2, stop_words="english").fit_transform(self.texts)
        except ValueError:  # no text at all (or only stop words): no neighbours to ask
            self.vectors = None
        self.tails: dict[tuple[int, int], set[int]] = defaultdict(set)
        self.heads: dict[tuple[int, int], set[int]] = defaultdict(set)
        subjects: dict[int, set[int]] = defaultdict(set)
        objects: dict[int, set[int]] = defaultdict(set)
        for h, r, t in kg_triples(kg_id).tolist():
            self.tails[(h, r)].add(t)
            self.heads[(r, t)].add(h)
            subjects[r].add(self.position[h])
            objects[r].add(self.position[t])
        self._subjects = {r: np.array(sorted(members)) for r, members in subjects.items()}
        self._objects = {r: np.array(sorted(members)) for r, members in objects.items()}
        self._pools: dict[tuple[int, str], tuple[np.ndarray, object] | None] = {}

    def _pool(self, relation: int, side: str) -> tuple[np.ndarray, object] | None:
        """The positions of the entities seen as the relation's subjects ("tail" side) or objects ("head"), and their
        rows of the TF-IDF matrix (sliced once per relation and side: slicing is most of a vote's cost)."""
        key = (relation, side)
        if key not in self._pools:
            positions = (self._subjects if side == "tail" else self._objects).get(relation)
            self._pools[key] = None if positions is None or self.vectors is None else (positions, self.vectors[positions])
        return self._pools[key]

    def _vote(self, anchor: int, relation: int, side: str, holds) -> Vote:
        pool = self._pool(relation, side)
        if pool is None or anchor not in self.position:
            return Vote(0.0)
        positions, vectors = pool
        similarity = (vectors @ self.vectors[self.position[anchor]].T).toarray().ravel()
        similarity[positions == self.position[anchor]] = 0.0  # never its own neighbour
        top = np.argsort(-similarity, kind="stable")[:NEIGHBOURS]
        top = top[similarity[top] > 0]
        neighbours = [(self.rows[positions[i]], float(similarity[i]), holds(self.rows[positions[i]])) for i in top]
        total = sum(s for _, s, _ in neighbours)
        share = sum(s for _, s, held in neighbours if held) / total if total > 0 else 0.0
        return Vote(share, neighbours)

    def _named(self, text_of: int, named: int) -> bool:
        pattern = _pattern(self, named)
        return bool(pattern and text_of in self.position and pattern.search(self.texts[self.position[text_of]]))

    def triple_rows(self, head: str, relation: str, tail: str) -> tuple[int, int, int] | None:
        """The row ids of a triple given by external ids; None if a part is not in the KG (as it was indexed)."""
        parts = (self.entity_row.get(head), self.relation_row.get(relation), self.entity_row.get(tail))
        return None if None in parts else parts

    def described(self, head: int, relation: int, tail: int) -> Described:
        tail_vote = self._vote(head, relation, "tail", lambda e: tail in self.tails.get((e, relation), ()))
        head_vote = self._vote(tail, relation, "head", lambda e: head in self.heads.get((relation, e), ()))
        words = content_words(self.labels.get(tail, ""), GENERIC_TAIL_WORDS)
        text = self.texts[self.position[head]].lower() if head in self.position else ""
        share = sum(bool(re.search(r"\b" + w, text)) for w in words) / len(words) if words else 0.0
        return Described(tail_vote, head_vote, self._named(head, tail), self._named(tail, head), share)


@lru_cache(maxsize=65536)
def _cached_pattern(names: tuple[str, ...]) -> re.Pattern | None:
    return mention_pattern(list(names))


def _pattern(index: DescriptionIndex, entity: int) -> re.Pattern | None:
    return _cached_pattern(tuple(entity_names(index.labels.get(entity, ""), index.aliases.get(entity, []))))


_INDEXES: dict[int, tuple[int, DescriptionIndex]] = {}  # KG row id → (version, its index)
_BUILDING = threading.Lock()


def index_for(kg_id: int, version: int) -> DescriptionIndex:
    """The description index of a KG version, built once per process (a newer version replaces it)."""
    with _BUILDING:
        cached = _INDEXES.get(kg_id)
        if cached is None or cached[0] != version:
            cached = (version, DescriptionIndex(kg_id))
            _INDEXES[kg_id] = cached
        return cached[1]
