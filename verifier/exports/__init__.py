"""Exports of verified triples: JSON, CSV, an HTML/PDF evidence report, PROV-O (Turtle, JSON-LD), and the changes
the reviewers' decisions make to the KG (TSV, SPARQL Update).

``records.select`` gathers what is known about the chosen runs once; ``render`` turns it into a file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.http import HttpResponse

from verifier.exports import changes, prov, report, tabular
from verifier.exports.records import Selection, SelectionError

MAX_REPORT_RUNS = 100  # a report is read by people, and PDF layout time grows with every run


@dataclass(frozen=True)
class ExportFormat:
    name: str
    label: str  # as the queue's export offers it
    content_type: str
    extension: str
    render: Callable[[Selection, str], str | bytes]  # (selection, IRI base) → the file
    max_runs: int | None = None
    stem: str = "export"  # what the file is, in its name (kgv-changes-…)


FORMATS: dict[str, ExportFormat] = {
    f.name: f
    for f in (
        ExportFormat("json", "JSON", "application/json", "json", lambda s, base: tabular.to_json(s)),
        ExportFormat("csv", "CSV", "text/csv; charset=utf-8", "csv", lambda s, base: tabular.to_csv(s)),
        ExportFormat("html", "HTML report", "text/html; charset=utf-8", "html", lambda s, base: report.to_html(s),
                     MAX_REPORT_RUNS),
        ExportFormat("pdf", "PDF report", "application/pdf", "pdf", lambda s, base: report.to_pdf(s), MAX_REPORT_RUNS),
        ExportFormat("ttl", "PROV-O Turtle", "text/turtle; charset=utf-8", "ttl", prov.to_turtle),
        ExportFormat("jsonld", "PROV-O JSON-LD", "application/ld+json", "jsonld", prov.to_jsonld),
        ExportFormat("changes", "KG changes (TSV)", "text/tab-separated-values; charset=utf-8", "tsv",
                     lambda s, base: changes.to_tsv(s), stem="changes"),
        ExportFormat("sparql-update", "KG changes (SPARQL Update)", "application/sparql-update; charset=utf-8", "ru",
                     changes.to_sparql_update, stem="changes"),
    )
}


@dataclass(frozen=True)
class ExportFile:
    content: bytes
    content_type: str
    filename: str


def filename_for(selection: Selection, extension: str, stem: str = "export") -> str:
    kind = "" if stem == "export" else f"{stem}-"
    if len(selection.claims) == 1:
        return f"kgv-{kind}claim-{selection.claims[0].claim_id}.{extension}"
    if len(selection.records) == 1 and not selection.claims:
        record = selection.records[0]
        return f"kgv-{kind}task-{record.task_id}-run-{record.run_id}.{extension}"
    return f"kgv-{stem}-{len(selection.records)}-runs-{selection.taken_at:%Y%m%d-%H%M%S}.{extension}"


def render(selection: Selection, fmt: str, *, base: str = prov.DEFAULT_BASE) -> ExportFile:
    """The selection as a file of format ``fmt`` (a key of FORMATS)."""
    export_format = FORMATS[fmt]
    if export_format.max_runs is not None and len(selection.records) > export_format.max_runs:
        raise SelectionError(f"a {fmt} report covers at most {export_format.max_runs} runs; "
                             f"export {len(selection.records)} runs as json, csv, ttl or jsonld")
    content = export_format.render(selection, base)
    data = content.encode("utf-8") if isinstance(content, str) else content
    return ExportFile(data, export_format.content_type, filename_for(selection, export_format.extension, export_format.stem))


def file_response(selection: Selection, fmt: str, *, base: str, inline: bool = False) -> HttpResponse:
    """The selection's file as an HTTP download (``inline``: shown in the browser), naming the tasks with no finished
    run to export in ``X-KGV-Skipped-Tasks``. Raises SelectionError when nothing is exportable."""
    if not selection.records and not selection.claims:
        raise SelectionError("none of these tasks has a finished run to export")
    file = render(selection, fmt, base=base)
    response = HttpResponse(file.content, content_type=file.content_type)
    response["Content-Disposition"] = f'{"inline" if inline else "attachment"}; filename="{file.filename}"'
    if selection.skipped_tasks:
        response["X-KGV-Skipped-Tasks"] = ",".join(map(str, selection.skipped_tasks))
    return response
