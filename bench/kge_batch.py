"""Time a KG's training steps with glibc's default allocation and with the heap kept for reuse (heap.py).

Trains the KG's default network (`kge.default_config`, with JSON overrides) through the training loop
`train_kge` uses, on the first triples of its training set — enough for `--batches` steps — one epoch to
warm up, then one epoch with glibc's defaults, then one inside `heap.reused_heap()`; prints seconds of wall
time and of user and system CPU per step. Stores nothing.

    make install && DEBUG=1 .venv/bin/python bench/kge_batch.py fb15k-237 --batches 40
    DEBUG=1 .venv/bin/python bench/kge_batch.py fb15k-237 '{"batch_size": 2048}'
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kgv_web.settings")
os.environ.setdefault("DEBUG", "1")

import django  # noqa: E402

django.setup()

import torch  # noqa: E402
from pykeen.training import TrainingCallback  # noqa: E402

from verifier.models import KnowledgeGraph  # noqa: E402
from verifier.structure import heap, kge  # noqa: E402
from verifier.structure.dataset import training_data  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kg")
    parser.add_argument("config", nargs="?", default="{}", help="KGEConfig settings over the KG's default, as JSON")
    parser.add_argument("--batches", type=int, default=40, help="training steps per timed epoch")
    args = parser.parse_args()
    kg = KnowledgeGraph.objects.get(name=args.kg)
    data = training_data(kg)
    config = replace(kge.default_config(len(data.train), data.num_entities), **json.loads(args.config))
    triples = data.train[: args.batches * config.batch_size // 2]  # 1vsAll: a row per triple and per its inverse
    torch.set_num_threads(os.cpu_count() or 1)
    model = kge.build_model(config, data.num_entities, data.num_relations)
    factory = kge.triples_factory(triples, data.num_entities, data.num_relations)
    optimizer = kge.OPTIMIZERS[config.optimizer](model.parameters(), lr=config.learning_rate)
    loop = kge.training_loop(config, model, factory, optimizer)
    print(f"{args.kg}: {config.train_type}, dim {config.dim}, batch {config.batch_size}, {config.precision}; "
          f"{data.num_entities:,} entities, {len(triples):,} triples a timed epoch")

    class Steps(TrainingCallback):
        count = 0

        def post_batch(self, epoch: int, batch, **kwargs) -> None:
            Steps.count += 1

    def epoch(number: int) -> tuple[float, float, float, int]:
        started, cpu, Steps.count = time.perf_counter(), os.times(), 0
        with kge.precision(config):
            loop.train(triples_factory=factory, num_epochs=number, batch_size=config.batch_size,
                       continue_training=number > 1, use_tqdm=False, callbacks=Steps())
        ended = os.times()
        return time.perf_counter() - started, ended.user - cpu.user, ended.system - cpu.system, Steps.count

    epoch(1)  # warm-up: the first steps allocate Adam's state and PyKEEN's buffers
    for number, (label, allocation) in enumerate([("glibc's defaults", None), ("heap kept", heap.reused_heap)], 2):
        if allocation is None:
            wall, user, system, steps = epoch(number)
        else:
            with allocation():
                wall, user, system, steps = epoch(number)
        print(f"  {label:16} {wall / steps:.3f} s a step (user {user / steps:.3f} s, system {system / steps:.3f} s "
              f"of CPU), {steps} steps")


if __name__ == "__main__":
    main()
