import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def _checks(response):
    return {c["name"]: c for c in response.json()["checks"]}


def test_health_reports_database_pgvector_redis_and_a_live_worker(celery_worker_process):
    response = Client().get("/health/")
    checks = _checks(response)
    assert response.status_code == 200, checks
    assert checks["database"]["ok"] and checks["database"]["detail"].startswith("PostgreSQL 18")
    assert checks["pgvector"]["ok"] and checks["pgvector"]["detail"].startswith("pgvector 0.8")
    assert checks["redis"]["ok"]
    assert checks["worker"]["ok"] and celery_worker_process in checks["worker"]["detail"]


def test_health_page_renders_for_browsers(celery_worker_process):
    response = Client().get("/health/", HTTP_ACCEPT="text/html")
    assert response.status_code == 200
    assert b"all services up" in response.content


def test_home_requires_sign_in():
    response = Client().get("/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
