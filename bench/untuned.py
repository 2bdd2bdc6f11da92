"""KGs nobody tuned KGV for, onboarded without labels: how good and how honest are their verdicts?

    DEBUG=1 KGV_EMBEDDED_DIR=.embedded/bench .venv/bin/python bench/untuned.py umls kinships nations fb-subset

Each KG is onboarded from a file as a curator would (``manage.py onboard``: load, networks, a calibration fitted on
its own facts against corruptions of them, its verdicts weighed by that calibration), from its training and
validation triples; its test triples (never in the KG) are then verified beside as many type-constrained
negatives (an entity of the same relation signature in place of the head or the tail; ``--types role``: an entity the
KG has in the same role of the relation, which every test triple has) with ``manage.py evaluate``:
the weighed verdict (the evidence mode) and the embedding classifier alone (the embedding mode, the CoDEx protocol's
baseline). Printed: accuracy with its 95% interval, F1 and ECE of each, and the seconds each onboarding stage took.

- umls, kinships, nations: the small dense KGs PyKEEN ships (UMLS's biomedical concepts, Kinships' 104 people and
  their kinship terms, Nations' 14 countries), never used to choose a default;
- fb-subset: 100,000 FB15k-237 triples among a seeded set of its entities, every entity and relation renamed to an
  opaque IRI (so nothing knows it as FB15k-237) and written as N-Triples with the entities' labels and descriptions:
  the size and shape of a curator's own Wikidata-style export. Its test triples are FB15k-237 validation triples
  between those entities.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kgv_web.settings")
os.environ.setdefault("DEBUG", "1")

import django  # noqa: E402

django.setup()

import pykeen.datasets  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.management import CommandError, call_command  # noqa: E402

from verifier import confidence  # noqa: E402
from verifier.evaluation.metrics import wilson_interval  # noqa: E402
from verifier.models import Evaluation, KnowledgeGraph, Onboarding  # noqa: E402
from verifier.onboarding import summary_lines  # noqa: E402

PYKEEN = Path(pykeen.datasets.__file__).parent
FB_TRIPLES = 100_000
BASE = "http://example.org/kg/"


def _iri(kind: str, key: str) -> str:
    return f"<{BASE}{kind}/{hashlib.sha1(key.encode()).hexdigest()[:12]}>"


def _literal(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ") + '"@en'


def pykeen_files(name: str, folder: Path) -> tuple[Path, Path]:
    kg, test = folder / f"{name}.tsv", folder / f"{name}-test.tsv"
    kg.write_text("".join((PYKEEN / name / split).read_text() for split in ("train.txt", "valid.txt")))
    test.write_text((PYKEEN / name / "test.txt").read_text())
    return kg, test


def fb_subset_files(folder: Path, seed: int = 0) -> tuple[Path, Path]:
    """FB15k-237 restricted to the entities of a seeded walk until FB_TRIPLES triples, renamed, as N-Triples."""
    data = settings.KGV_DATA_DIR / "fb15k-237"
    triples = [tuple(line.strip().split("\t")) for line in (data / "train.txt").read_text().splitlines() if line.strip()]
    rng = random.Random(seed)
    entities = sorted({e for h, _, t in triples for e in (h, t)})
    rng.shuffle(entities)
    kept: set[str] = set()
    chosen: list[tuple[str, str, str]] = []
    for size in range(2000, len(entities) + 1, 500):
        kept = set(entities[:size])
        chosen = [t for t in triples if t[0] in kept and t[2] in kept]
        if len(chosen) >= FB_TRIPLES:
            break
    chosen = chosen[:FB_TRIPLES]
    used = {e for h, _, t in chosen for e in (h, t)}
    names = json.loads((data / "entity2wikidata.json").read_text())
    text = {line.split("\t")[0]: line.split("\t")[1] for line in (data / "entity2text.txt").read_text().splitlines() if "\t" in line}
    lines = [f"{_iri('e', h)} {_iri('r', r)} {_iri('e', t)} ." for h, r, t in chosen]
    for entity in sorted(used):
        info = names.get(entity) or {}
        label = info.get("label") or text.get(entity)
        if label:
            lines.append(f"{_iri('e', entity)} <http://www.w3.org/2000/01/rdf-schema#label> {_literal(label)} .")
        if info.get("description"):
            lines.append(f"{_iri('e', entity)} <http://schema.org/description> {_literal(info['description'])} .")
    kg = folder / "fb-subset.nt"
    kg.write_text("\n".join(lines) + "\n", encoding="utf-8")
    in_kg = set(chosen)
    valid = [tuple(line.strip().split("\t")) for line in (data / "valid.txt").read_text().splitlines() if line.strip()]
    held = [t for t in valid if t[0] in used and t[2] in used and t not in in_kg]
    test = folder / "fb-subset-test.tsv"
    strip = lambda iri: iri[1:-1]  # noqa: E731
    test.write_text("".join(f"{strip(_iri('e', h))}\t{strip(_iri('r', r))}\t{strip(_iri('e', t))}\n" for h, r, t in held))
    return kg, test


def evaluate(name: str, test: Path, mode: str, n: int, types: str = "signature") -> dict | str:
    """The evaluation's metrics, or why none could be drawn (a KG whose entities each hold every role has no
    type-constrained negative)."""
    label = f"untuned-{name}-{mode}-{n}" + ("" if types == "signature" else f"-{types}")
    if not Evaluation.objects.filter(name=label, status=Evaluation.Status.FINISHED).exists():
        try:
            call_command("evaluate", "--benchmark", str(test), "--kg", name, "--n", str(n), "--seed", "0", "--mode", mode,
                         "--name", label, "--no-progress", "--concurrency", "2", "--types", types)
        except CommandError as exc:
            return str(exc)
    return Evaluation.objects.get(name=label).metrics


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kgs", nargs="+", choices=["umls", "kinships", "nations", "fb-subset"])
    parser.add_argument("--n", type=int, default=400, help="test triples and negatives verified per KG and mode")
    parser.add_argument("--types", choices=["signature", "role"], default="signature",
                        help="negatives: an entity of the same relation signature (default), or one seen in the same "
                             "role of the relation (every test triple of a KG without declared types has one)")
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    confidence.seed_shipped_models()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for name in args.kgs:
            kg_file, test = fb_subset_files(Path(folder)) if name == "fb-subset" else pykeen_files(name, Path(folder))
            if not KnowledgeGraph.objects.filter(name=name, version__gt=0).exists():
                call_command("onboard", str(kg_file), "--name", name, "--no-progress")
            onboarding = Onboarding.objects.filter(name=name, status=Onboarding.Status.FINISHED).order_by("-pk").first()
            figures = {mode: evaluate(name, test, mode, args.n, args.types) for mode in ("evidence", "embedding")}
            rows.append((name, onboarding, figures))
    for name, onboarding, figures in rows:
        print(f"\n{name}")
        if onboarding is not None:
            for line in summary_lines(onboarding):
                print(f"  {line}")
        for mode, f in figures.items():
            if isinstance(f, str):
                print(f"  {mode:>9}: not measured: {f[:200]}")
                continue
            calibration = f.get("calibration") or {}
            low, high = wilson_interval(round(f["accuracy"] * f["n"]), f["n"])
            ece = calibration.get("ece")
            print(f"  {mode:>9}: accuracy {f['accuracy']:.1%} ({low:.1%}–{high:.1%}), F1 {f['f1']:.3f}, "
                  f"ECE {'-' if ece is None else f'{ece:.3f}'}, n {f['n']}")


if __name__ == "__main__":
    main()
