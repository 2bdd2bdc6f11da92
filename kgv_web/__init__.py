from kgv_web.celery import app as celery_app

__all__ = ["celery_app"]
