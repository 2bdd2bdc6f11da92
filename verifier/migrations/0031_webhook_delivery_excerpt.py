from django.db import migrations, models


class Migration(migrations.Migration):
    """A delivery keeps the start of the receiver's answer (200 characters), no longer the answer, and how long the
    attempt took."""

    dependencies = [
        ('verifier', '0030_kg_audit'),
    ]

    operations = [
        migrations.RenameField(model_name='webhookdelivery', old_name='response_body', new_name='response_excerpt'),
        migrations.AlterField(
            model_name='webhookdelivery',
            name='response_excerpt',
            field=models.TextField(blank=True, help_text="the start of the receiver's last answer (at most 200 characters, "
                                                         "anything unprintable escaped); the answer itself is not kept"),
        ),
        migrations.RunSQL("UPDATE verifier_webhookdelivery SET response_excerpt = left(response_excerpt, 200)",
                          reverse_sql=migrations.RunSQL.noop),
        migrations.AddField(
            model_name='webhookdelivery',
            name='duration_ms',
            field=models.PositiveIntegerField(blank=True, help_text='how long the last attempt took', null=True),
        ),
    ]
