"""An audit's suspects as a KG team takes them: a CSV (one row per suspect) and a report (what was audited, how well
the scorer separates facts from errors, the distribution, suspects per relation, then every suspect with its
reasons), rendered by templates/verifier/kg_audit/report.html."""

from __future__ import annotations

import csv
import io

from django.template.loader import render_to_string

from verifier.exports.tabular import spreadsheet_safe
from verifier.models import KGAudit, Relation, Suspect

CSV_COLUMNS = ("rank", "suspicion", "head_id", "head", "relation_id", "relation", "tail_id", "tail", "reasons",
               "new_since_previous_audit", "queued_as_task")


def file_name(audit: KGAudit, suffix: str) -> str:
    """The name a download of the audit's suspects or report is saved under."""
    return f"kg-audit-{audit.pk}-{audit.kg.name}.{suffix}"


def suspects_of(audit: KGAudit):
    return Suspect.objects.filter(audit=audit).select_related("head", "relation", "tail").order_by("rank")


def to_csv(audit: KGAudit) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS)
    writer.writeheader()
    for s in suspects_of(audit).iterator(chunk_size=2000):
        writer.writerow({key: spreadsheet_safe(value) for key, value in {
            "rank": s.rank, "suspicion": s.suspicion, "head_id": s.head.external_id, "head": s.head.label,
            "relation_id": s.relation.external_id, "relation": s.relation.label, "tail_id": s.tail.external_id,
            "tail": s.tail.label, "reasons": " | ".join(r["text"] for r in s.reasons),
            "new_since_previous_audit": str(s.new).lower(), "queued_as_task": s.task_id or ""}.items()})
    return out.getvalue()


def relation_rows(audit: KGAudit) -> list[dict]:
    """The summary's suspects per relation, with each relation's label."""
    per_relation = (audit.summary or {}).get("per_relation") or []
    labels = dict(Relation.objects.filter(pk__in=[row["relation"] for row in per_relation]).values_list("pk", "label"))
    external = dict(Relation.objects.filter(pk__in=labels).values_list("pk", "external_id"))
    return [{**row, "label": labels.get(row["relation"]) or external.get(row["relation"], ""),
             "share": row["suspects"] / row["triples"] if row["triples"] else 0.0} for row in per_relation]


def to_html(audit: KGAudit, *, limit: int = 1000) -> str:
    return render_to_string("verifier/kg_audit/report.html", {
        "audit": audit, "relations": relation_rows(audit)[:50], "suspects": suspects_of(audit)[:limit],
        "shown": min(limit, audit.suspects.count()), "histogram": histogram_rows(audit)})


def histogram_rows(audit: KGAudit) -> list[dict]:
    """The distribution of P(wrong) as rows a template draws as bars: [{"low", "high", "count", "width"}]."""
    histogram = (audit.summary or {}).get("histogram") or {}
    counts, edges = histogram.get("counts") or [], histogram.get("edges") or []
    peak = max(counts, default=0) or 1
    return [{"low": edges[i], "high": edges[i + 1], "count": count, "width": round(100 * count / peak, 1)}
            for i, count in enumerate(counts)]
