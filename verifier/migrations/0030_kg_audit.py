import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('verifier', '0029_structural_model_folds'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='KGAudit',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kg_version', models.PositiveIntegerField()),
                ('status', models.CharField(choices=[('queued', 'Queued'), ('running', 'Running'), ('finished', 'Finished'), ('failed', 'Failed')], db_index=True, default='queued', max_length=10)),
                ('stage', models.CharField(blank=True, max_length=200)),
                ('triples', models.PositiveIntegerField(default=0)),
                ('scored', models.PositiveIntegerField(default=0)),
                ('chunk_size', models.PositiveIntegerField(default=50000)),
                ('scorer', models.JSONField(blank=True, default=dict, help_text='the fitted classifier every chunk scores with')),
                ('metrics', models.JSONField(blank=True, default=dict, help_text="how well the classifier tells the KG's facts from corruptions, out of fold")),
                ('summary', models.JSONField(blank=True, default=dict, help_text='distribution, suspects per relation, what moved')),
                ('error', models.TextField(blank=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('started_at', models.DateTimeField(blank=True, null=True)),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
                ('heartbeat_at', models.DateTimeField(blank=True, null=True)),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('kg', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='kg_audits', to='verifier.knowledgegraph')),
                ('previous', models.ForeignKey(blank=True, help_text='the audit of the same KG it is compared with', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='verifier.kgaudit')),
                ('structural_model', models.ForeignKey(blank=True, help_text='the model whose networks scored the triples', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='verifier.structuralmodel')),
            ],
            options={
                'ordering': ['-created_at', '-id'],
            },
        ),
        migrations.CreateModel(
            name='Onboarding',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.SlugField(help_text='the name the KG gets', max_length=100)),
                ('file', models.CharField(help_text='where the uploaded file is kept until it is loaded', max_length=1000)),
                ('status', models.CharField(choices=[('queued', 'Queued'), ('running', 'Running'), ('finished', 'Finished'), ('failed', 'Failed')], default='queued', max_length=10)),
                ('stage', models.CharField(blank=True, max_length=200)),
                ('progress', models.FloatField(default=0.0)),
                ('seconds', models.JSONField(blank=True, default=dict, help_text='seconds each stage took')),
                ('quality', models.JSONField(blank=True, default=dict, help_text="what was reached, measured on the KG's own facts")),
                ('error', models.TextField(blank=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('kg', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='verifier.knowledgegraph')),
            ],
            options={
                'ordering': ['-created_at', '-id'],
            },
        ),
        migrations.CreateModel(
            name='AuditChunk',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('index', models.PositiveIntegerField()),
                ('done', models.BooleanField(default=False)),
                ('scores', models.BinaryField(blank=True, help_text='row-id triples and P(wrong), as .npz', null=True)),
                ('seconds', models.FloatField(default=0.0)),
                ('audit', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='chunks', to='verifier.kgaudit')),
            ],
            options={
                'ordering': ['audit', 'index'],
                'constraints': [models.UniqueConstraint(fields=('audit', 'index'), name='auditchunk_unique')],
            },
        ),
        migrations.CreateModel(
            name='Suspect',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('rank', models.PositiveIntegerField()),
                ('suspicion', models.FloatField(help_text="how likely it is wrong, 0–1 (odds taken as even; see the audit's page)")),
                ('reasons', models.JSONField(blank=True, default=list)),
                ('details', models.JSONField(blank=True, default=dict, help_text='the rules, the model and the reference KGs, read on demand')),
                ('new', models.BooleanField(default=False, help_text='not a suspect of the audit compared with')),
                ('audit', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='suspects', to='verifier.kgaudit')),
                ('head', models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='verifier.entity')),
                ('relation', models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='verifier.relation')),
                ('tail', models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='verifier.entity')),
                ('task', models.ForeignKey(blank=True, help_text='the flagged triple it was queued as', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='verifier.verificationtask')),
            ],
            options={
                'ordering': ['audit', 'rank'],
                'indexes': [models.Index(fields=['audit', 'relation'], name='suspect_relation_idx')],
                'constraints': [models.UniqueConstraint(fields=('audit', 'rank'), name='suspect_rank_unique')],
            },
        ),
    ]
