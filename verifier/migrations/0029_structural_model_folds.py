import django.db.models.deletion
from django.db import migrations, models


def retire_single_networks(apps, schema_editor):
    """A model trained as one network has no fold networks to score with: it stops serving, and the KG's next start
    (or an administrator) trains one network per fold."""
    StructuralModel = apps.get_model("verifier", "StructuralModel")
    StructuralModel.objects.filter(status__in=["ready", "queued", "training"]).update(
        status="failed", stage="failed",
        error="trained as a single network: a structural model is now one network per fold of the KG's triples; train it again")


class Migration(migrations.Migration):

    dependencies = [
        ('verifier', '0028_reference_kgs'),
    ]

    operations = [
        migrations.RunPython(retire_single_networks, migrations.RunPython.noop),
        migrations.RemoveField(
            model_name='structuralmodel',
            name='weights',
        ),
        migrations.AddField(
            model_name='structuralmodel',
            name='folds',
            field=models.PositiveSmallIntegerField(default=5, help_text='networks, each trained without one fold of the triples'),
        ),
        migrations.CreateModel(
            name='FoldNetwork',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('fold', models.PositiveSmallIntegerField()),
                ('weights', models.BinaryField()),
                ('metrics', models.JSONField(blank=True, default=dict, help_text='epochs, minutes, validation MRR, why it stopped')),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('model', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='networks', to='verifier.structuralmodel')),
            ],
            options={
                'ordering': ['model', 'fold'],
            },
        ),
        migrations.DeleteModel(
            name='HeldOutTriple',
        ),
        migrations.AddConstraint(
            model_name='foldnetwork',
            constraint=models.UniqueConstraint(fields=('model', 'fold'), name='foldnetwork_unique'),
        ),
    ]
