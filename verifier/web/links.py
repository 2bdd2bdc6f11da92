"""Links between workbench areas, reversed by route name: one home for each cross-area URL."""

from __future__ import annotations

from urllib.parse import urlencode

from django.urls import reverse

from verifier.exports import FORMATS


def run_url(run_id: int) -> str:
    return reverse("run-detail", args=[run_id])


def task_url(task_id: int) -> str:
    return reverse("task-detail", args=[task_id])


def export_url(fmt: str, task_ids: list[int] = (), *, claim_ids: list[int] = ()) -> str:
    """The evidence export of ``task_ids`` and ``claim_ids`` (the API's GET /api/export/<fmt>/?tasks=1,2&claims=3)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; use {', '.join(FORMATS)}")
    base = reverse("api:export", kwargs={"fmt": fmt})
    query = {name: ",".join(str(pk) for pk in ids) for name, ids in (("tasks", task_ids), ("claims", claim_ids)) if ids}
    return f"{base}?{urlencode(query, safe=',')}"


def claim_export_links(claim_id: int) -> list[tuple[str, str, str]]:
    """(format, label, URL) of every export of one claim, as the claim page offers them."""
    return [(fmt, export_format.label, export_url(fmt, claim_ids=[claim_id])) for fmt, export_format in FORMATS.items()]
