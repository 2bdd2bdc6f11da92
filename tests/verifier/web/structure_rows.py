"""StructuralModel rows in each state a training job leaves behind (verifier/structure/training.py writes
them; these are the same rows without training anything)."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from verifier.models import KnowledgeGraph, StructuralModel


def local_kg(name: str = "codex-s", version: int = 1) -> KnowledgeGraph:
    return KnowledgeGraph.objects.create(name=name, title=name.upper(), version=version, loaded_at=timezone.now())


def training(kg: KnowledgeGraph, *, progress: float = 0.45, stage: str = "training: epoch 40/300, held-out MRR 0.351",
             beat_ago: timedelta = timedelta(seconds=3)) -> StructuralModel:
    now = timezone.now()
    return StructuralModel.objects.create(kg=kg, kg_version=kg.version, status=StructuralModel.Status.TRAINING, progress=progress,
                                          stage=stage, started_at=now - timedelta(minutes=20), heartbeat_at=now - beat_ago)


def ready(kg: KnowledgeGraph, *, mrr: float = 0.43, version: int | None = None) -> StructuralModel:
    now = timezone.now()
    return StructuralModel.objects.create(
        kg=kg, kg_version=kg.version if version is None else version, status=StructuralModel.Status.READY, progress=1.0,
        stage="ready", config={"kge": {"model": "ComplEx", "dim": 64}},
        metrics={"validation": {"mrr": mrr, "hits_at_1": 0.3, "hits_at_10": 0.6}, "epochs": 300, "training_seconds": 812.4},
        started_at=now - timedelta(minutes=30), finished_at=now, heartbeat_at=now)


def failed(kg: KnowledgeGraph, error: str = "RuntimeError: CUDA out of memory\nTraceback …") -> StructuralModel:
    now = timezone.now()
    return StructuralModel.objects.create(kg=kg, kg_version=kg.version, status=StructuralModel.Status.FAILED, progress=0.3,
                                          stage="failed", error=error, started_at=now - timedelta(minutes=5), finished_at=now,
                                          heartbeat_at=now)
