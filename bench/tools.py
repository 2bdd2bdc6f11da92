"""Latency of the agent's tools, and of KG_Path / KG_Neighbor at 5M+ edges against pyoxigraph (SPARQL).

KG_Plausibility answers from the KG's ready structural model (manage.py train_kge) and KG_Rules from its
mined rules (load_kg); without them they answer with a message, which is timed and counted as such. A
dataset not yet loaded is loaded without training its structural model unless ``--train`` is given (the
training is a Celery task that the next worker runs: about 45 minutes of CPU for FB15k-237).

    make install && DEBUG=1 .venv/bin/python bench/tools.py [--queries 100] [--edges 5000000]

1. Every tool through the registry (name resolution, query, rendering; no cache) on CoDEx-S and
   FB15k-237, for triples of their validation splits (the triple under test withheld), p50/p95 in ms.
2. FB15k-237 train, and a generated graph (power-law degrees, seeded) of at least 5M edges, each loaded
   into the local store and into an in-memory pyoxigraph store. For held-out triples (in neither graph:
   FB15k-237's validation split; edges removed from the generated graph), KG_Path(head, tail) and
   KG_Neighbor(head, relation) are timed on both, after one warm-up pass, answering the same question:
   - paths: shortest-first top-20 paths of 1–3 edges, each edge in either direction. SPARQL runs one query
     per length with LIMIT (what "shortest first, stop at 20" means in SPARQL); on FB15k-237 the full
     enumeration without LIMIT is timed too, for scale. The local store prunes hubs (> HUB_DEGREE edges)
     as 3-hop middles and ranks candidates by relation similarity; the SPARQL queries do neither.
   - neighbours: all one-hop edges of the entity in both directions, then the top 20 by cosine between
     relation label embeddings (SPARQL cannot rank by embedding, so that part runs in Python).
The generated graph is cached under .cache/bench and kept in the database as KG "bench-generated".
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import quote, unquote

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kgv_web.settings")
os.environ.setdefault("DEBUG", "1")

import django  # noqa: E402

django.setup()

import numpy as np  # noqa: E402
import pyoxigraph as ox  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402

from verifier.agent.steps import Claim  # noqa: E402
from verifier.kg.loader import embed_relation_labels, load_source  # noqa: E402
from verifier.kg.sources import read_tsv_triples  # noqa: E402
from verifier.kg.store import PostgresKG  # noqa: E402
from verifier.memory import encoder  # noqa: E402
from verifier.models import KnowledgeGraph, Relation  # noqa: E402
from verifier.structure.evidence import StructuralEvidence  # noqa: E402
from verifier.tools.base import ToolContext  # noqa: E402
from verifier.tools.registry import Toolbox  # noqa: E402

CACHE = settings.KGV_CACHE_DIR / "bench"
BASE = "http://kgv.bench/"


def percentiles(values: list[float]) -> str:
    if not values:
        return "      n/a"
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return f"p50 {statistics.median(ordered):7.1f}  p95 {p95:7.1f}"


def timed(function, *args, **kwargs) -> tuple[float, object]:
    started = time.perf_counter()
    result = function(*args, **kwargs)
    return (time.perf_counter() - started) * 1000, result


# ------------------------------------------------------------------------------------------------
# 1. Every tool on the real datasets
# ------------------------------------------------------------------------------------------------


def ensure_dataset(name: str, *, train: bool = False) -> KnowledgeGraph:
    """The loaded KG; loaded on first use, its structural model trained only with ``train``."""
    kg = KnowledgeGraph.objects.filter(name=name, version__gt=0).first()
    if kg is None:
        if train:
            print(f"loading {name} (first run only) and queuing its structural model's training: a Celery worker "
                  "picks it up (tens of minutes of CPU on a large KG)…", flush=True)
            call_command("load_kg", name, "--no-progress")
        else:
            print(f"loading {name} (first run only) without training its structural model, so KG_Plausibility answers "
                  f"that no model is ready (manage.py train_kge {name}, or --train)…", flush=True)
            call_command("load_kg", name, "--no-progress", "--no-kge")
        kg = KnowledgeGraph.objects.get(name=name)
    embed_relation_labels(kg)  # a KG loaded with --no-embed cannot rank neighbours otherwise
    return kg


def validation_queries(kg: KnowledgeGraph, path: Path, n: int) -> list[Claim]:
    store = PostgresKG(kg)
    queries = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            head, relation, tail = line.rstrip("\r\n").split("\t")
            h, r, t = store.entity(head), store.relation(relation), store.entity(tail)
            if h and r and t:
                queries.append(Claim(head, relation, tail, h.label, r.label, t.label))
            if len(queries) == n:
                break
    return queries


def bench_tools(name: str, valid: Path, n: int, *, train: bool = False) -> None:
    kg = ensure_dataset(name, train=train)
    store = PostgresKG(kg)
    from verifier.evidence.corpus import PostgresCorpus

    corpus = PostgresCorpus(kg)
    queries = validation_queries(kg, valid, n)
    calls = {
        "KG_Definition (entity)": lambda q: ("KG_Definition", [q.head_label]),
        "KG_Definition (relation)": lambda q: ("KG_Definition", [q.relation_label]),
        "KG_Neighbor": lambda q: ("KG_Neighbor", [q.head_label, q.relation_label]),
        "KG_Path": lambda q: ("KG_Path", [q.head_label, q.tail_label]),
        "Wiki_Evidence (entity)": lambda q: ("Wiki_Evidence", [q.head_label]),
        "Wiki_Evidence (pair)": lambda q: ("Wiki_Evidence", [q.head_label, q.tail_label]),
        "Read_Sentences": lambda q: ("Read_Sentences", [q.head, q.relation, q.tail]),
        "KG_Plausibility": lambda q: ("KG_Plausibility", [q.head, q.relation, q.tail]),
        "KG_Rules": lambda q: ("KG_Rules", [q.head, q.relation, q.tail]),
    }
    encoder.encode(["warm up"])
    structure = StructuralEvidence(kg)
    if queries:  # the embedding model is loaded once per process, on its first question: not part of a call's latency
        structure.plausibility(queries[0].head, queries[0].relation, queries[0].tail)
    timings: dict[str, list[float]] = {label: [] for label in calls}
    failures = dict.fromkeys(calls, 0)
    for query in queries:
        context = ToolContext(kg=store, corpus=corpus, query=query, structure=structure)
        for label, make in calls.items():
            tool_name, args = make(query)
            ms, result = timed(Toolbox(context).call, tool_name, args)  # a fresh toolbox: no cache
            timings[label].append(ms)
            failures[label] += not result.ok
    print(f"\n{name}: {len(queries)} validation triples, ms per call (no cache)")
    for label, values in timings.items():
        note = f"  ({failures[label]} answered with a message, e.g. an ambiguous name)" if failures[label] else ""
        print(f"  {label:26s} {percentiles(values)}{note}")


# ------------------------------------------------------------------------------------------------
# 2. The generated graph: local store vs pyoxigraph
# ------------------------------------------------------------------------------------------------


def generate(edges: int, entities: int, relations: int, held_out: int, seed: int) -> tuple[Path, Path, list[tuple]]:
    """A power-law multigraph as TSV (for the store) and N-Triples (for pyoxigraph), minus held-out edges."""
    CACHE.mkdir(parents=True, exist_ok=True)
    stem = CACHE / f"generated-{edges}-{entities}-{relations}-{seed}"
    tsv, nt, held = stem.with_suffix(".tsv"), stem.with_suffix(".nt"), stem.with_suffix(".held.tsv")
    if tsv.exists() and nt.exists() and held.exists():
        return tsv, nt, [tuple(line.split("\t")) for line in held.read_text().splitlines()]
    rng = np.random.default_rng(seed)
    weights = (np.arange(entities) + 20.0) ** -0.9
    weights /= weights.sum()
    heads = rng.choice(entities, size=int(edges * 1.02), p=weights)
    tails = rng.choice(entities, size=int(edges * 1.02), p=weights)
    rels = rng.zipf(1.6, size=int(edges * 1.02)) % relations
    triples = np.unique(np.stack([heads, rels, tails], axis=1), axis=0)
    triples = triples[triples[:, 0] != triples[:, 2]]
    triples = triples[rng.permutation(len(triples))][: edges + held_out]
    held_rows, kept = triples[:held_out], triples[held_out:]
    with tsv.open("w") as out_tsv, nt.open("w") as out_nt:
        for h, r, t in kept:
            out_tsv.write(f"e{h}\tr{r}\te{t}\n")
            out_nt.write(f"{iri(f'e{h}')} {iri(f'r{r}')} {iri(f'e{t}')} .\n")
    held.write_text("".join(f"e{h}\tr{r}\te{t}\n" for h, r, t in held_rows))
    return tsv, nt, [(f"e{h}", f"r{r}", f"e{t}") for h, r, t in held_rows]


def ensure_generated(tsv: Path, relation_labels: list[str]) -> KnowledgeGraph:
    kg = KnowledgeGraph.objects.filter(name="bench-generated", description=str(tsv)).first()
    if kg is None:
        print(f"loading {tsv.name} into the local store…", flush=True)
        KnowledgeGraph.objects.filter(name="bench-generated").update(name=f"bench-generated-old-{time.time():.0f}")
        ms, report = timed(load_source, read_tsv_triples(tsv, name="bench-generated"), embed=False, progress=True)
        kg = report.kg
        KnowledgeGraph.objects.filter(pk=kg.pk).update(description=str(tsv))
        print(f"  {report.counts['triples']:,} triples, {report.counts['entities']:,} entities in {ms / 1000:.0f} s")
        for relation in Relation.objects.filter(kg=kg):
            relation.label = relation_labels[int(relation.external_id[1:]) % len(relation_labels)]
            relation.save(update_fields=["label"])
        embed_relation_labels(kg)
        kg.refresh_from_db()
    return kg


def iri(local: str) -> str:
    return f"<{BASE}{quote(local, safe='')}>"


def local_name(term) -> str:
    return unquote(term.value[len(BASE):])


def sparql_paths(store: ox.Store, a: str, b: str, limit: int | None) -> int:
    """Paths a…b of 1–3 edges, either direction, as SPARQL: one query per length, shortest first, with
    LIMIT for the remaining count (or every path when ``limit`` is None)."""
    hop = "{{ {s} ?p{i} {o} }} UNION {{ {o} ?p{i} {s} }}"
    found = 0
    for length in (1, 2, 3):
        remaining = None if limit is None else limit - found
        if remaining is not None and remaining <= 0:
            break
        nodes = [iri(a)] + [f"?x{i}" for i in range(1, length)] + [iri(b)]
        patterns = " . ".join(hop.format(s=nodes[i], o=nodes[i + 1], i=i) for i in range(length))
        filters = " ".join(f"FILTER(?x{i} != {iri(a)} && ?x{i} != {iri(b)})" for i in range(1, length))
        if length == 3:
            filters += " FILTER(?x1 != ?x2)"
        query = f"SELECT * WHERE {{ {patterns} {filters} }}" + (f" LIMIT {remaining}" if remaining else "")
        found += sum(1 for _ in store.query(query))
    return found


def sparql_neighbours(store: ox.Store, entity: str, relation_vectors: dict[str, np.ndarray], query_relation: str) -> int:
    rows = list(store.query(f"SELECT ?p ?o WHERE {{ {{ {iri(entity)} ?p ?o }} UNION {{ ?o ?p {iri(entity)} }} }}"))
    if not rows:
        return 0
    target = relation_vectors[query_relation]
    scores = np.array([relation_vectors[local_name(row["p"])] @ target for row in rows])
    return len(np.argsort(-scores, kind="stable")[:20])


def write_ntriples(tsv: Path, nt: Path) -> None:
    with tsv.open(encoding="utf-8") as source, nt.open("w", encoding="utf-8") as out:
        for line in source:
            head, relation, tail = line.rstrip("\r\n").split("\t")
            out.write(f"{iri(head)} {iri(relation)} {iri(tail)} .\n")


def versus_sparql(kg: KnowledgeGraph, nt: Path, held: list[tuple[str, str, str]], *, full_enumeration: bool) -> None:
    """KG_Path and KG_Neighbor on the local store vs the same questions to pyoxigraph on the same graph."""
    store = PostgresKG(kg)
    print(f"loading {kg.name} into pyoxigraph (in memory)…", flush=True)
    oxigraph = ox.Store()
    ms, _ = timed(oxigraph.bulk_load, path=str(nt), format=ox.RdfFormat.N_TRIPLES)
    print(f"  loaded in {ms / 1000:.0f} s")
    relation_vectors = {r.external_id: np.asarray(r.embedding) for r in Relation.objects.filter(kg=kg)}
    encoder.encode(["warm up"])
    series: dict[str, list[float]] = {}

    def record(label, function, *args):
        ms, result = timed(function, *args)
        series.setdefault(label, []).append(ms)
        return result

    for head, _relation, tail in held:  # a warm-up pass, so both stores answer from memory
        Toolbox(ToolContext(kg=store)).call("KG_Path", [head, tail])
        sparql_paths(oxigraph, head, tail, 20)
    for head, relation, tail in held:
        context = ToolContext(kg=store, query=Claim(head, relation, tail, head, "", tail))
        record("KG_Path      local store (tool, shortest-first top 20)  ", Toolbox(context).call, "KG_Path", [head, tail])
        record("KG_Path      pyoxigraph  (SPARQL, shortest-first top 20)", sparql_paths, oxigraph, head, tail, 20)
        if full_enumeration:
            record("KG_Path      pyoxigraph  (SPARQL, every 1-3-hop path)   ", sparql_paths, oxigraph, head, tail, None)
        record("KG_Neighbor  local store (tool, top 20 by relation)     ", Toolbox(context).call, "KG_Neighbor", [head, relation])
        record("KG_Neighbor  pyoxigraph  (SPARQL + ranking in Python)   ", sparql_neighbours, oxigraph, head, relation_vectors, relation)
    print(f"\n{kg.name}: {kg.triples.count():,} edges, {kg.entities.count():,} entities; {len(held)} held-out triples "
          "as queries (not in either graph); ms per call")
    for label, values in series.items():
        print(f"  {label} {percentiles(values)}")


def bench_generated(edges: int, queries: int) -> None:
    relation_labels = sorted(set(Relation.objects.exclude(label="").values_list("label", flat=True)))[:100] or ["related to"]
    tsv, nt, held = generate(edges, entities=max(edges // 20, 1000), relations=100, held_out=queries, seed=7)
    versus_sparql(ensure_generated(tsv, relation_labels), nt, held, full_enumeration=False)


def bench_fb15k(queries: int) -> None:
    folder = settings.KGV_DATA_DIR / "fb15k-237"
    kg = ensure_dataset("fb15k-237")
    nt = CACHE / "fb15k-237-train.nt"
    if not nt.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        write_ntriples(folder / "train.txt", nt)
    held = [(q.head, q.relation, q.tail) for q in validation_queries(kg, folder / "valid.txt", queries)]
    versus_sparql(kg, nt, held, full_enumeration=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--edges", type=int, default=5_000_000)
    parser.add_argument("--skip-datasets", action="store_true")
    parser.add_argument("--skip-generated", action="store_true")
    parser.add_argument("--train", action="store_true",
                        help="a dataset this loads also gets its structural model trained (a Celery task; default: not)")
    args = parser.parse_args()
    data = settings.KGV_DATA_DIR
    if not args.skip_datasets:
        bench_tools("codex-s", data / "codex-s" / "triples" / "valid.txt", args.queries, train=args.train)
        bench_tools("fb15k-237", data / "fb15k-237" / "valid.txt", args.queries, train=args.train)
    if not args.skip_datasets:
        bench_fb15k(args.queries)
    if not args.skip_generated:
        bench_generated(args.edges, args.queries)


if __name__ == "__main__":
    main()
