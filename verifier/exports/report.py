"""The evidence report: an HTML page (printable) and the same page as PDF through xhtml2pdf."""

from __future__ import annotations

import io
from pathlib import Path

from django.template.loader import render_to_string
from xhtml2pdf import pisa
from xhtml2pdf.config.resources import ResourceAccessPolicy

from verifier.exports.records import Selection

TEMPLATE = "verifier/exports/report.html"


class ReportRenderingError(RuntimeError):
    """xhtml2pdf could not lay out the report."""


def report_title(selection: Selection) -> str:
    if len(selection.claims) == 1:
        return f"KGV evidence report — claim {selection.claims[0].claim_id}"
    if selection.claims:
        return f"KGV evidence report — {len(selection.claims)} claims"
    if len(selection.records) == 1:
        return f"KGV evidence report — {selection.records[0].triple_text}"
    return f"KGV evidence report — {len(selection.records)} runs"


def to_html(selection: Selection, *, fonts: dict[str, Path] | None = None) -> str:
    context = {
        "title": report_title(selection),
        "records": selection.records,
        "claims": selection.claims,
        "sections": len(selection.claims) + len(selection.records),  # more than one: each starts a page
        "skipped_tasks": selection.skipped_tasks,
        "generated_at": selection.taken_at,
        "fonts": fonts,
    }
    return render_to_string(TEMPLATE, context)


def pdf_fonts() -> dict[str, Path]:
    """DejaVu Sans, as shipped with matplotlib: the PDF's built-in fonts have no arrows (⇒, →), no ≤ and few
    letters beyond Latin-1, which a report about any KG meets."""
    import matplotlib

    folder = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
    return {"regular": folder / "DejaVuSans.ttf", "bold": folder / "DejaVuSans-Bold.ttf", "mono": folder / "DejaVuSansMono.ttf"}


def to_pdf(selection: Selection) -> bytes:
    """The report as PDF. The layout reads the font files and nothing else: no network, no file but the fonts'
    (xhtml2pdf's default confines reads to the working directory, which the fonts need not be under)."""
    fonts = pdf_fonts()
    policy = ResourceAccessPolicy(allow_remote=False, base_dir=None,
                                  extra_roots=tuple(sorted({path.resolve().parent for path in fonts.values()})))
    buffer = io.BytesIO()
    result = pisa.CreatePDF(to_html(selection, fonts=fonts), dest=buffer, encoding="utf-8", resource_policy=policy)
    if result.err:
        raise ReportRenderingError(f"the PDF report could not be laid out ({result.err} error(s))")
    return buffer.getvalue()
