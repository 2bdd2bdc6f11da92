"""Links between workbench areas that other modules register: reversed by name when the route exists,
else the documented path (so a page never breaks while a sibling area is being built)."""

from __future__ import annotations

from urllib.parse import urlencode

from django.urls import NoReverseMatch, reverse

EXPORT_FORMATS = ("json", "csv", "html", "pdf", "ttl", "jsonld")


def url_or_path(name: str, args: list | None, fallback: str, kwargs: dict | None = None) -> str:
    try:
        return reverse(name, args=args, kwargs=kwargs)
    except NoReverseMatch:
        return fallback


def run_url(run_id: int) -> str:
    return url_or_path("run-detail", [run_id], f"/runs/{run_id}/")


def task_url(task_id: int) -> str:
    return url_or_path("task-detail", [task_id], f"/tasks/{task_id}/")


def export_url(fmt: str, task_ids: list[int]) -> str:
    """The evidence export of ``task_ids`` (the API's GET /api/export/<fmt>/?tasks=1,2,3)."""
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; use {', '.join(EXPORT_FORMATS)}")
    base = url_or_path("api:export", None, f"/api/export/{fmt}/", kwargs={"fmt": fmt})
    return f"{base}?{urlencode({'tasks': ','.join(str(pk) for pk in task_ids)}, safe=',')}"
