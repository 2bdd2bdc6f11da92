"""Benchmarks: a KG plus labelled triples, drawn reproducibly (seeded) from dataset files.

- ``codex-s``: CoDEx-S valid positives and its given hard negatives, as relation-matched pairs (the
  negatives are dominated by one relation; unmatched, the relation alone would give the label away).
- ``fb15k-237``: FB15k-237 valid positives, each paired with a type-constrained negative made from it
  (see verifier/benchmarks/sampling.py).
- ``codex-s-test``, ``fb15k-237-test``: the same over the datasets' test splits, where their files are present
  (they do not ship with the data; nothing is ever fitted on them).
- a file of triples (CSV or TSV, by ids, labels or aliases, as ``import_tasks`` reads them): with a label
  column every row must have a label and the rows are sampled as given; without labels the rows are
  positives and get type-constrained negatives like FB15k-237.

A file with bad rows (wrong column count, unknown or ambiguous terms, bad or missing labels, one triple
with two labels) is rejected with every bad row and its line number; nothing is evaluated.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from django.conf import settings

from verifier.benchmarks.sampling import (
    NegativeSampler,
    Triple,
    corrupted_pairs,
    declared_type_keys,
    distinct,
    popular_values,
    relation_matched_pairs,
    relation_roles,
    relation_signature_keys,
)
from verifier.errors import ApplicationError
from verifier.kg.flagged import ResolvedRow, read_flagged, resolve_rows
from verifier.kg.loader import ImportRejected
from verifier.kg.sources import Problem
from verifier.models import Entity, FitTriple, KnowledgeGraph
from verifier.models import Triple as KGTriple

TYPE_SCHEMES = ("auto", "declared", "signature", "role", "popular")


class BenchmarkError(ApplicationError):
    """The benchmark cannot be built as asked (unknown name, KG not loaded, nothing to draw)."""


@dataclass(frozen=True)
class LabelledTriple:
    head_id: int  # primary keys of the KG's Entity / Relation rows
    relation_id: int
    tail_id: int
    label: bool
    origin: str  # where it comes from: "valid.txt:12", "valid.txt:12 with the tail replaced", …

    @property
    def key(self) -> Triple:
        return self.head_id, self.relation_id, self.tail_id


@dataclass
class Benchmark:
    spec: str
    kg: KnowledgeGraph
    triples: list[LabelledTriple]
    notes: dict = field(default_factory=dict)


@dataclass(frozen=True)
class _Dataset:
    kg_name: str
    positives: str  # path relative to KGV_DATA_DIR
    negatives: str | None = None
    split: str = "valid"  # calibrations and early stopping use the validation split; a test split only benchmarks

    def files(self) -> list[str]:
        return [path for path in (self.positives, self.negatives) if path]


DATASETS = {
    "codex-s": _Dataset("codex-s", "codex-s/triples/valid.txt", "codex-s/triples/valid_negatives.txt"),
    "fb15k-237": _Dataset("fb15k-237", "fb15k-237/valid.txt"),
    "codex-s-test": _Dataset("codex-s", "codex-s/triples/test.txt", "codex-s/triples/test_negatives.txt", split="test"),
    "fb15k-237-test": _Dataset("fb15k-237", "fb15k-237/test.txt", split="test"),
}


# Benchmarks over a test split: their runs are never fitted on (``calibrate`` refuses them, reviews of them are skipped).
HELD_OUT_BENCHMARKS = frozenset(spec for spec, dataset in DATASETS.items() if dataset.split != "valid")


def validation_benchmark(kg_name: str) -> str | None:
    """The benchmark over a KG's validation split, the one labelled data is fitted on (None: not a dataset)."""
    return next((spec for spec, d in DATASETS.items() if d.kg_name == kg_name and d.split == "valid"), None)


def available_benchmarks() -> list[str]:
    """The dataset benchmarks that can be drawn here: their KG is loaded and their files are in KGV_DATA_DIR."""
    loaded = set(KnowledgeGraph.objects.values_list("name", flat=True))
    return [spec for spec, dataset in DATASETS.items()
            if dataset.kg_name in loaded and all((settings.KGV_DATA_DIR / path).is_file() for path in dataset.files())]


def validation_dataset(kg_name: str) -> _Dataset | None:
    """The dataset entry of ``validation_benchmark``."""
    spec = validation_benchmark(kg_name)
    return DATASETS[spec] if spec else None


def benchmark_kg(spec: str, kg_name: str | None = None) -> KnowledgeGraph:
    """The loaded KG whose triples the benchmark ``spec`` draws: a shipped dataset's own KG (or ``kg_name``),
    ``kg_name`` for a file of triples."""
    dataset = DATASETS.get(spec)
    if dataset is not None:
        return _kg(kg_name or dataset.kg_name)
    if not Path(spec).is_file():
        raise BenchmarkError(f"unknown benchmark {spec!r}: not one of {', '.join(DATASETS)} and not a file")
    if not kg_name:
        raise BenchmarkError("a benchmark file needs --kg: the KG its triples belong to")
    return _kg(kg_name)


def build_benchmark(spec: str, *, n: int, seed: int, kg_name: str | None = None, data_dir: Path | None = None,
                    types: str = "auto") -> Benchmark:
    """``n`` labelled triples (half true, half false where the data allows) of the benchmark ``spec``."""
    if n < 2:
        raise BenchmarkError("a benchmark needs at least 2 triples (one positive/negative pair)")
    if types not in TYPE_SCHEMES:
        raise BenchmarkError(f"unknown type scheme {types!r}; one of {', '.join(TYPE_SCHEMES)}")
    data_dir = data_dir or settings.KGV_DATA_DIR
    rng = random.Random(seed)
    kg = benchmark_kg(spec, kg_name)
    dataset = DATASETS.get(spec)
    if dataset is not None:
        missing = [path for path in dataset.files() if not (data_dir / path).is_file()]
        if missing:
            hint = "; the dataset ships without its test split: copy it there to benchmark on it" if dataset.split == "test" else ""
            raise BenchmarkError(f"{spec} needs {' and '.join(missing)} in {data_dir} (KGV_DATA_DIR){hint}")
        positives = read_rows(kg, data_dir / dataset.positives)
        also_true = _validation_positives(dataset, kg, data_dir) if dataset.split != "valid" else set()
        if dataset.negatives:
            negatives = read_rows(kg, data_dir / dataset.negatives)
            return _matched(spec, kg, positives, negatives, n, rng, also_true)
        return _sampled(spec, kg, positives, n, rng, types, also_true)
    rows = read_rows(kg, Path(spec), check_labels=True)
    if all(row.label is None for row in rows):
        return _sampled(spec, kg, rows, n, rng, types, set())
    return _labelled(spec, kg, rows, n, rng)


def _validation_positives(split: _Dataset, kg: KnowledgeGraph, data_dir: Path) -> set[Triple]:
    """True triples of the dataset's validation split: another split's negatives must not be any of them."""
    dataset = validation_dataset(split.kg_name)
    if dataset is None or not (data_dir / dataset.positives).is_file():
        return set()
    return set(map(_key, read_rows(kg, data_dir / dataset.positives)))


def _kg(name: str) -> KnowledgeGraph:
    kg = KnowledgeGraph.objects.filter(name=name).first()
    if kg is None or kg.version == 0:
        raise BenchmarkError(f"the KG {name!r} is not loaded; run manage.py load_kg first")
    return kg


def read_rows(kg: KnowledgeGraph, path: Path, *, check_labels: bool = False) -> list[ResolvedRow]:
    """Every row of ``path`` resolved against ``kg``; any bad row rejects the file (all of them listed).
    ``check_labels``: labels are optional but all-or-none, and a triple has one label."""
    if not path.is_file():
        raise BenchmarkError(f"{path} is missing (KGV_DATA_DIR={settings.KGV_DATA_DIR})")
    rows, problems = read_flagged(path)
    resolved, unresolved = resolve_rows(kg, rows, path)
    problems += unresolved
    if check_labels and any(row.label is not None for row in rows):
        problems += [Problem(path, row.line, "no label, while other rows have one") for row in rows if row.label is None]
        problems += _conflicting_labels(path, resolved)
    if problems:
        raise ImportRejected(sorted(problems, key=lambda p: p.line))
    if not resolved:
        raise BenchmarkError(f"{path} holds no triples")
    return resolved


def _conflicting_labels(path: Path, rows: list[ResolvedRow]) -> list[Problem]:
    seen: dict[Triple, ResolvedRow] = {}
    problems = []
    for row in rows:
        key = (row.head_id, row.relation_id, row.tail_id)
        first = seen.setdefault(key, row)
        if first.label is not None and row.label is not None and first.label != row.label:
            problems.append(Problem(path, row.line, f"the same triple is labelled {first.label} on line {first.line}"))
    return problems


def _key(row: ResolvedRow) -> Triple:
    return row.head_id, row.relation_id, row.tail_id


def _origins(rows: list[ResolvedRow], path_name: str) -> dict[Triple, str]:
    origins: dict[Triple, str] = {}
    for row in rows:
        origins.setdefault(_key(row), f"{path_name}:{row.line}")
    return origins


def kg_triple_set(kg: KnowledgeGraph) -> set[Triple]:
    return set(KGTriple.objects.filter(kg=kg).values_list("head_id", "relation_id", "tail_id").iterator(chunk_size=50_000))


def fitted_triples(kg: KnowledgeGraph) -> set[Triple]:
    """Labelled triples something was fitted on (the confidence model, the memory bank, a calibration that
    is not cross-fitted): a benchmark never draws them. A triple of a cross-fitted calibration is scored by
    the fit that left its fold out (verifier/structure/fitting.py), so it is not among them."""
    return set(FitTriple.objects.filter(kg=kg, fold__isnull=True).values_list("head_id", "relation_id", "tail_id"))


def _matched(spec: str, kg: KnowledgeGraph, positives: list[ResolvedRow], negatives: list[ResolvedRow], n: int,
             rng: random.Random, also_true: set[Triple]) -> Benchmark:
    fitted = fitted_triples(kg)  # a triple the KG states is drawn as any other: the network of its fold never learnt it
    pos_keys = [k for k in distinct(map(_key, positives)) if k not in fitted]
    true_keys = set(pos_keys) | also_true
    neg_keys = [k for k in distinct(map(_key, negatives)) if k not in true_keys and k not in fitted]
    pairs = relation_matched_pairs(pos_keys, neg_keys, n // 2, rng)
    pos_origin = _origins(positives, DATASETS[spec].positives.rsplit("/", 1)[-1])
    neg_origin = _origins(negatives, (DATASETS[spec].negatives or "").rsplit("/", 1)[-1])
    triples = []
    for positive, negative in pairs:
        triples.append(LabelledTriple(*positive, True, pos_origin[positive]))
        triples.append(LabelledTriple(*negative, False, neg_origin[negative]))
    notes = {"method": "relation-matched pairs of given positives and negatives", "pairs": len(pairs),
             "positives_read": len(positives), "negatives_read": len(negatives),
             "dropped_fitted": len(distinct(map(_key, positives + negatives))) - len(pos_keys) - len(neg_keys),
             "fitted_excluded": len(fitted)}
    return _checked(Benchmark(spec, kg, triples, notes), n)


def negative_sampler(kg: KnowledgeGraph, scheme: str, kg_triples: set[Triple], forbidden: set[Triple]) -> tuple[NegativeSampler, str]:
    """The sampler of type-constrained corruptions of ``kg``'s triples under ``scheme`` and the scheme used ("auto":
    declared types when the KG has them, else relation signatures), never drawing a triple of ``forbidden``;
    candidates are ordered by external id, so a seed draws the same negatives on any installation."""
    typed = Entity.objects.filter(kg=kg).exclude(types=[]).exists()
    if scheme == "auto":
        scheme = "declared" if typed else "signature"
    external = dict(Entity.objects.filter(kg=kg).values_list("id", "external_id"))
    if scheme == "declared" or (scheme == "popular" and typed):
        keys = declared_type_keys(dict(Entity.objects.filter(kg=kg).values_list("id", "types")))
    else:  # by role, the signatures still say what each entity is (the claim benchmark reads them)
        keys = relation_signature_keys(kg_triples)
    roles = relation_roles(kg_triples) if scheme == "role" else None
    popular = popular_values(kg_triples, keys) if scheme == "popular" else None
    return NegativeSampler(keys, forbidden, sort_key=external.__getitem__, roles=roles, popular=popular), scheme


def _sampled(spec: str, kg: KnowledgeGraph, positives: list[ResolvedRow], n: int, rng: random.Random,
             types: str, also_true: set[Triple]) -> Benchmark:
    in_kg = kg_triple_set(kg)
    known_true = {_key(row) for row in positives} | also_true
    fitted = fitted_triples(kg)
    sampler, scheme = negative_sampler(kg, types, in_kg, in_kg | known_true | fitted)
    entities = list(Entity.objects.filter(kg=kg).values_list("id", flat=True))
    pool = [k for k in distinct(map(_key, positives)) if k not in fitted]
    drawn, skipped = corrupted_pairs(pool, n // 2, sampler, rng)
    origin = _origins(positives, Path(spec).name if spec not in DATASETS else DATASETS[spec].positives.rsplit("/", 1)[-1])
    triples = []
    for positive, negative in drawn:
        triples.append(LabelledTriple(*positive, True, origin[positive]))
        triples.append(LabelledTriple(*negative.triple, False, f"{origin[positive]} with the {negative.replaced} replaced"))
    same = "role in the relation" if scheme == "role" else "type"
    notes = {"method": f"type-constrained negatives (head or tail replaced by an entity of the same {same})",
             "caveat": ("The negatives are not checked: some are true facts the KG lacks, and a verdict of Correct on one "
                        "counts as an error. A curator can size the share: manage.py audit_labels draws a blind sample to judge."),
             "type_scheme": scheme, "pairs": len(drawn), "positives_read": len(positives),
             "positives_fitted": len(distinct(map(_key, positives))) - len(pool), "positives_without_same_type_replacement": skipped,
             "typed_entities": sum(1 for e in entities if sampler.replaceable(e)), "entities": len(entities)}
    return _checked(Benchmark(spec, kg, triples, notes), n)


def _labelled(spec: str, kg: KnowledgeGraph, rows: list[ResolvedRow], n: int, rng: random.Random) -> Benchmark:
    fitted = fitted_triples(kg)
    rows = [row for row in rows if _key(row) not in fitted]
    unique = {_key(row): row for row in reversed(rows)}  # first occurrence wins
    ordered = [unique[k] for k in distinct(map(_key, rows))]
    chosen = sorted(rng.sample(range(len(ordered)), min(n, len(ordered))))
    name = Path(spec).name
    triples = [LabelledTriple(*_key(ordered[i]), bool(ordered[i].label), f"{name}:{ordered[i].line}") for i in chosen]
    notes = {"method": "labelled triples as given, sampled", "rows_read": len(rows), "distinct": len(ordered)}
    return _checked(Benchmark(spec, kg, triples, notes), n)


def _checked(benchmark: Benchmark, n: int) -> Benchmark:
    if not benchmark.triples:
        raise BenchmarkError(f"no labelled triple could be drawn from {benchmark.spec} ({benchmark.notes})")
    benchmark.notes["requested"] = n
    benchmark.notes["drawn"] = len(benchmark.triples)
    benchmark.notes["positives"] = sum(t.label for t in benchmark.triples)
    return benchmark


def dataset_validation(kg: KnowledgeGraph) -> np.ndarray | None:
    """Row-id triples of the dataset's own validation split (not in the KG), when the KG is a known dataset."""
    dataset = validation_dataset(kg.name)
    if dataset is None or not (settings.KGV_DATA_DIR / dataset.positives).is_file():
        return None
    rows = set(map(_key, read_rows(kg, settings.KGV_DATA_DIR / dataset.positives)))
    return np.array(sorted(rows - kg_triple_set(kg)), dtype=np.int64).reshape(-1, 3)
