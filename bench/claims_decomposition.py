"""How faithfully claims become triples: the parts the product keeps against hand-checked pseudo-subgraphs.

    DEBUG=1 .venv/bin/python bench/claims_decomposition.py codex-s [--file bench/claims/decomposition.jsonl]
        [--subset generated|written] [--limit N] [--out reports/claims-decomposition.jsonl]

Each line of the file is a claim and the pseudo-subgraph it states (``parts``: ``[head, relation, tail, negated]``
as KG ids, ``unknown_i`` for an entity the claim only describes; ``[]`` for text that is no claim or that the KG
cannot represent). ``bench/claims/decomposition.jsonl`` holds 100 claims ``manage.py claims_benchmark codex-s --n
100`` generated from CoDEx-S's validation triples (subset ``generated``, their parts as the generator wrote them)
and 50 written by hand in plain English (``written``: one-hop in varied wording, conjunctions, negations, multi-hop
through an entity the claim only describes, existence, and 8 that are nonsense or unrepresentable).

Every claim goes through the product's decomposition (verifier/claims/decompose.py: refusal, the configured model —
the embedded local model unless LLM_BASE_URL is set — then the read-back of verifier/claims/grounding.py), nothing
stored. A kept part matches an expected one when head, relation and tail match (an unknown matches an unknown in the
same position; a symmetric relation — spouse, sibling, partner, shared border, diplomatic relation — either way round)
and so does the denial; each expected part is matched once. Printed per subset and overall: precision (matched /
kept), recall (matched / expected), the same without the denial, the claims whose parts are exactly the expected
ones, the expected-empty claims refused, and the seconds per claim. With ``--out`` each claim's outcome and the
model's reply are appended as it is done, and a stopped run resumes there. It asserts nothing.

``--replay FILE`` reads the claims and the model's replies an earlier ``--out`` recorded and reads each reply back
again, no model asked: a change to the read-back measured on the very replies it was measured on before (the
seconds per claim are the recorded run's).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kgv_web.settings")
os.environ.setdefault("DEBUG", "1")

import django  # noqa: E402

django.setup()

from kgv_web.embedded_llm import provide_local_llm  # noqa: E402
from verifier.agent.llm import Completion  # noqa: E402
from verifier.claims.decompose import decompose  # noqa: E402
from verifier.claims.grounding import ClaimRefused  # noqa: E402
from verifier.claims.subgraph import SubgraphError, is_unknown  # noqa: E402
from verifier.models import KnowledgeGraph  # noqa: E402
from verifier.wiring import build_llm  # noqa: E402

SYMMETRIC = {"P26", "P3373", "P451", "P47", "P530"}
DEFAULT_FILE = Path(__file__).resolve().parent / "claims" / "decomposition.jsonl"


def _key(part: list, *, polarity: bool = True) -> tuple:
    head, relation, tail, negated = part
    head, tail = ("?" if is_unknown(head) else head), ("?" if is_unknown(tail) else tail)
    if relation in SYMMETRIC:
        head, tail = sorted((head, tail))
    return (head, relation, tail, bool(negated)) if polarity else (head, relation, tail)


def matched(kept: list[list], expected: list[list], *, polarity: bool = True) -> int:
    """How many kept parts match an expected one, each expected part matched at most once."""
    left = [_key(p, polarity=polarity) for p in expected]
    count = 0
    for part in kept:
        key = _key(part, polarity=polarity)
        if key in left:
            left.remove(key)
            count += 1
    return count


def kept_parts(kg: KnowledgeGraph, text: str, llm) -> dict:
    """What the product makes of ``text``: the parts it keeps as KG ids, how it ended (kept / refused / failed), what
    the model wrote and what was left out."""
    try:
        decomposition = decompose(kg, text, llm)
    except ClaimRefused as refusal:
        return {"kept": [], "ended": f"refused: {refusal}", "written": "", "left_out": []}
    except SubgraphError as error:
        return {"kept": [], "ended": f"failed: {error}", "written": "", "left_out": []}
    ids = lambda name: name if is_unknown(name) else decomposition.entities[name].external_id  # noqa: E731
    parts = [[ids(t.head), decomposition.relations[t.relation].external_id, ids(t.tail), t.negated]
             for t in decomposition.triples]
    return {"kept": parts, "ended": "kept" if parts else "refused: nothing the model wrote is stated by the claim",
            "written": decomposition.written, "left_out": [item.as_dict() for item in decomposition.left_out]}


class Recorded:
    """The reply an earlier run recorded, given again in place of the model's."""

    supports_grammar = False

    def __init__(self, reply: str):
        self.reply = reply

    def complete(self, messages, **options) -> Completion:
        return Completion(self.reply, 0, 0, "recorded", 0.0, "stop")


def replayed(kg: KnowledgeGraph, row: dict) -> dict:
    """A recorded row read back again with the current code."""
    out = kept_parts(kg, row["claim"], Recorded(row["written"])) if row["written"] else {}
    row = {**row, **out}
    row["matched"] = matched(row["kept"], row["expected"])
    row["matched_any_polarity"] = matched(row["kept"], row["expected"], polarity=False)
    return row


def figures(rows: list[dict]) -> dict:
    kept = sum(len(r["kept"]) for r in rows)
    expected = sum(len(r["expected"]) for r in rows)
    hits = sum(r["matched"] for r in rows)
    loose = sum(r["matched_any_polarity"] for r in rows)
    empty = [r for r in rows if not r["expected"]]
    return {"claims": len(rows), "expected_parts": expected, "kept_parts": kept, "matched": hits,
            "precision": round(hits / kept, 3) if kept else None, "recall": round(hits / expected, 3) if expected else None,
            "precision_any_polarity": round(loose / kept, 3) if kept else None,
            "recall_any_polarity": round(loose / expected, 3) if expected else None,
            "exact_claims": sum(sorted(map(_key, r["kept"])) == sorted(map(_key, r["expected"])) for r in rows),
            "expected_empty": len(empty), "expected_empty_refused": sum(not r["kept"] for r in empty),
            "seconds_per_claim": round(sum(r["seconds"] for r in rows) / len(rows), 1) if rows else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kg", nargs="?", default="codex-s")
    parser.add_argument("--file", type=Path, default=DEFAULT_FILE)
    parser.add_argument("--subset", choices=("generated", "written"))
    parser.add_argument("--limit", type=int, help="the first N claims (of the subset)")
    parser.add_argument("--out", type=Path, help="append each claim's kept, expected and left-out parts and the model's "
                                                 "reply here (JSON Lines); the claims already there are not asked again")
    parser.add_argument("--replay", type=Path, help="read back the replies an earlier --out recorded, no model asked")
    args = parser.parse_args()
    kg = KnowledgeGraph.objects.filter(name=args.kg, version__gt=0).first()
    if kg is None:
        sys.exit(f"the KG {args.kg!r} is not loaded: manage.py load_kg {args.kg} --no-kge")
    if args.replay:
        recorded = [json.loads(line) for line in args.replay.read_text(encoding="utf-8").splitlines() if line.strip()]
        report([replayed(kg, row) for row in recorded if args.subset in (None, row["subset"])][:args.limit],
               f"replies recorded in {args.replay}, read back again")
        return
    items = [json.loads(line) for line in args.file.read_text(encoding="utf-8").splitlines() if line.strip()]
    items = [i for i in items if args.subset in (None, i["subset"])][:args.limit]
    done = {}
    if args.out and args.out.exists():  # a stopped run resumes: the claims already in --out are not asked again
        done = {(r["subset"], r["claim"]): r for r in map(json.loads, args.out.read_text(encoding="utf-8").splitlines())}
    elif args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
    provide_local_llm()  # no LLM_BASE_URL: the embedded model, stopped when this script ends
    llm = build_llm()
    rows = []
    started = time.perf_counter()
    for number, item in enumerate(items, start=1):
        row = done.get((item["subset"], item["claim"]))
        if row is None:
            began = time.perf_counter()
            row = {"claim": item["claim"], "subset": item["subset"], "category": item.get("category", ""),
                   "expected": item["parts"], "model": os.environ.get("LLM_MODEL", ""),
                   **kept_parts(kg, item["claim"], llm), "seconds": time.perf_counter() - began}
            row["matched"] = matched(row["kept"], item["parts"])
            row["matched_any_polarity"] = matched(row["kept"], item["parts"], polarity=False)
            if args.out:
                with args.out.open("a", encoding="utf-8") as handle:
                    handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        rows.append(row)
        mark = "ok " if row["matched"] == len(row["kept"]) == len(item["parts"]) else "-- "
        print(f"{number:3}/{len(items)} {mark}{row['seconds']:5.1f}s {item['claim'][:70]}  kept {row['kept']}  "
              f"{row['ended'][:60]}", flush=True)
    report(rows, f"{os.environ.get('LLM_MODEL', '')} at {os.environ.get('LLM_BASE_URL', '')}; {len(rows)} claims in "
                 f"{time.perf_counter() - started:.0f} s")


def report(rows: list[dict], source: str) -> None:
    by_subset = defaultdict(list)
    for row in rows:
        by_subset[row["subset"]].append(row)
    print(f"\nModel: {source}")
    print("| subset | claims | expected parts | kept parts | precision | recall | precision (any denial) | "
          "recall (any denial) | exact claims | empty expected: refused | s/claim |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, subset in [*sorted(by_subset.items()), ("all", rows)]:
        f = figures(subset)
        print(f"| {name} | {f['claims']} | {f['expected_parts']} | {f['kept_parts']} | {f['precision']} | {f['recall']} | "
              f"{f['precision_any_polarity']} | {f['recall_any_polarity']} | {f['exact_claims']} | "
              f"{f['expected_empty_refused']}/{f['expected_empty']} | {f['seconds_per_claim']} |")


if __name__ == "__main__":
    main()
