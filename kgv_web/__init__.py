import os

# OpenMP threads (PyTorch's, in training and the encoder) sleep while they wait instead of spinning. KGV shares its
# cores between trainings, verifications and the local model: a spinning thread of one stalls the others, and a
# training's threads wait on each other's descheduled barriers (5× fewer epochs per minute on a busy two-core
# machine). Read by the OpenMP runtime when it loads, so it is set before anything imports torch.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from kgv_web.celery import app as celery_app  # noqa: E402

__all__ = ["celery_app"]
