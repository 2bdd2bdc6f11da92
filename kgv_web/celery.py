"""The Celery application: broker and result backend on Redis (``REDIS_URL``)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kgv_web.settings")

app = Celery("kgv")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
