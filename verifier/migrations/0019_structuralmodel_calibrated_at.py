from django.db import migrations, models


class Migration(migrations.Migration):
    """When a structural model's calibration was fitted, in a column of its own: every tool call reads it, and
    reading it out of the calibration document made the database read the whole document each time."""

    dependencies = [
        ("verifier", "0018_claim_reviews"),
    ]

    operations = [
        migrations.AddField(
            model_name="structuralmodel",
            name="calibrated_at",
            field=models.DateTimeField(blank=True, help_text="when the calibration was fitted", null=True),
        ),
        migrations.RunSQL(
            "UPDATE verifier_structuralmodel SET calibrated_at = (calibration->>'fitted_at')::timestamptz "
            "WHERE calibration ? 'fitted_at'",
            migrations.RunSQL.noop,
        ),
    ]
