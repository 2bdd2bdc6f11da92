from django.db import migrations, models


def backfill(apps, schema_editor):
    """The signals of every run that already has a verdict (forced read from its steps)."""
    from verifier.quality import signals_of

    Run = apps.get_model("verifier", "Run")
    for run in Run.objects.exclude(verdict="").select_related("task__head", "task__tail").iterator(chunk_size=500):
        codes = signals_of(run)
        if codes:
            Run.objects.filter(pk=run.pk).update(signals=codes)


class Migration(migrations.Migration):

    dependencies = [
        ("verifier", "0014_saved_views"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="signals",
            field=models.JSONField(blank=True, default=list, help_text="verdict quality signals (verifier/quality.py)"),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
