# A run keeps the configuration as asked for beside the settled one it runs with. Runs stored before kept one
# configuration, the request (or, once a worker had run them, the request with the profile's defaults filled in):
# it is their request too.

from django.db import migrations, models
from django.db.models import F


def request_from_config(apps, schema_editor):
    apps.get_model("verifier", "Run").objects.update(request=F("config"))


class Migration(migrations.Migration):

    dependencies = [
        ("verifier", "0032_claim_refused_left_out"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="request",
            field=models.JSONField(blank=True, default=dict, help_text="the configuration as asked for"),
        ),
        migrations.AlterField(
            model_name="run",
            name="config",
            field=models.JSONField(blank=True, default=dict, help_text="the settled configuration the run runs with"),
        ),
        migrations.RunPython(request_from_config, migrations.RunPython.noop),
    ]
