"""``manage.py audit KG`` — rank every triple of a KG by how likely it is wrong (a KG audit, not the audit log):
here with a progress bar, or on the audit workers (``--workers``); ``--resume`` finishes the KG's interrupted
audit; ``--csv`` / ``--report`` write the suspects; ``--flag N`` queues the top N as flagged triples."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from verifier.kg_audit import exports
from verifier.kg_audit.pipeline import CHUNK, AuditError, queue_suspects, run_here, start_audit
from verifier.management.lookup import kg_named
from verifier.models import KGAudit


class Command(BaseCommand):
    help = "Audit a KG: every triple ranked by how likely it is wrong, with its reasons."

    def add_arguments(self, parser):
        parser.add_argument("kg", help="name of a loaded KG")
        parser.add_argument("--workers", action="store_true", help="score on the audit workers instead of here")
        parser.add_argument("--resume", action="store_true", help="finish the KG's latest unfinished audit here")
        parser.add_argument("--chunk-size", type=int, default=CHUNK, help="triples a worker scores at a time")
        parser.add_argument("--csv", type=Path, metavar="FILE", help="write the suspects as CSV")
        parser.add_argument("--report", type=Path, metavar="FILE", help="write the report (HTML)")
        parser.add_argument("--flag", type=int, metavar="N", help="queue the top N suspects as flagged triples")
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args, **options):
        kg = kg_named(options["kg"], loaded=True)
        if options["chunk_size"] < 1:
            raise CommandError("--chunk-size must be positive")
        try:
            if options["resume"]:
                audit = KGAudit.objects.filter(kg=kg).exclude(status=KGAudit.Status.FINISHED).order_by("-pk").first()
                if audit is None:
                    raise CommandError(f"{kg.name} has no unfinished audit to resume")
                KGAudit.objects.filter(pk=audit.pk).update(status=KGAudit.Status.RUNNING, error="")
            else:
                audit = start_audit(kg=kg, queue=options["workers"], chunk_size=options["chunk_size"])
            if options["workers"] and not options["resume"]:
                self.stdout.write(f"Audit #{audit.pk} of {kg.name} sent to the audit workers; progress on /kg-audits/{audit.pk}/")
                return
            audit = self._run(audit, options["no_progress"])
            if options["flag"]:
                self.stdout.write(f"Queued {queue_suspects(audit=audit, top=options['flag'])} suspect(s) as flagged triples "
                                  f"(source audit:{audit.pk}).")
        except AuditError as exc:
            raise CommandError(str(exc)) from None
        if options["csv"]:
            options["csv"].write_text(exports.to_csv(audit), encoding="utf-8")
            self.stdout.write(f"Suspects written to {options['csv']}")
        if options["report"]:
            options["report"].write_text(exports.to_html(audit), encoding="utf-8")
            self.stdout.write(f"Report written to {options['report']}")

    def _run(self, audit: KGAudit, quiet: bool) -> KGAudit:
        bar = tqdm(total=max(audit.triples, 1), desc=f"audit #{audit.pk}", unit="triples", disable=quiet)

        def report(progress) -> None:
            bar.total = max(progress.total, 1)
            bar.n = progress.done
            bar.refresh()

        try:
            audit = run_here(audit, report=report)
        finally:
            bar.close()
        if audit.status != KGAudit.Status.FINISHED:
            raise CommandError(f"audit #{audit.pk} {audit.status}: {audit.error}")
        auc = (audit.metrics or {}).get("auc") or {}
        summary = audit.summary
        self.stdout.write(self.style.SUCCESS(
            f"Audit #{audit.pk} of {audit.kg.name}: {audit.triples:,} triples scored in "
            f"{(audit.finished_at - audit.started_at).total_seconds():.0f} s; {summary['likely_wrong']:,} at suspicion 0.5 "
            f"or above; {summary['suspects']:,} suspects kept. Facts told from corruptions with ROC AUC {auc.get('all', 0):.3f}."))
        if summary.get("compared"):
            moved = summary["compared"]
            self.stdout.write(f"Since audit #{audit.previous_id}: {moved['new']} new suspects, {moved['gone']} gone, "
                              f"{moved['kept']} still suspects.")
        for suspect in exports.suspects_of(audit)[:10]:
            why = "; ".join(r["text"] for r in suspect.reasons[:2]) or "the statistics together"
            self.stdout.write(f"  {suspect.rank:>3}. {suspect.suspicion:.2f}  {suspect.head.label or suspect.head.external_id} · "
                              f"{suspect.relation.label or suspect.relation.external_id} · "
                              f"{suspect.tail.label or suspect.tail.external_id} — {why}")
        return audit
