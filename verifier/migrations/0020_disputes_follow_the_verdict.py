"""A run is disputed when the structural evidence disputes its verdict (verifier/agent/weighing.py,
``dispute_reason``), no longer when it disputes a small model's answer that the weighing overruled: the stored
flags and reasons are recomputed by that rule."""

from django.db import migrations, models

from verifier.agent.weighing import dispute_reason


def recompute(apps, schema_editor):
    Run = apps.get_model("verifier", "Run")
    runs = (Run.objects.filter(status="succeeded", verdict__in=["correct", "incorrect"], assessment__has_key="structural_probability")
            .only("id", "verdict", "assessment", "disputed"))
    changed = []
    for run in runs.iterator(chunk_size=2000):
        reason = dispute_reason(run.verdict, run.assessment.get("structural_probability"))
        if reason != run.assessment.get("disputed_reason", "") or bool(reason) != run.disputed:
            run.assessment = {**run.assessment, "disputed_reason": reason}
            run.disputed = bool(reason)
            changed.append(run)
        if len(changed) >= 2000:
            Run.objects.bulk_update(changed, ["assessment", "disputed"])
            changed = []
    Run.objects.bulk_update(changed, ["assessment", "disputed"])


class Migration(migrations.Migration):
    dependencies = [("verifier", "0019_structuralmodel_calibrated_at")]
    operations = [
        migrations.AlterField(model_name="run", name="disputed",
                              field=models.BooleanField(default=False, help_text="the structural evidence disputes the verdict")),
        migrations.RunPython(recompute, migrations.RunPython.noop),
    ]
