import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("verifier", "0006_roles"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="Evaluation",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.SlugField(max_length=200, unique=True)),
                ("suite", models.CharField(blank=True, db_index=True, max_length=200)),
                ("benchmark", models.CharField(help_text="codex-s, fb15k-237 or a file of labelled triples", max_length=500)),
                ("sample_size", models.PositiveIntegerField()),
                ("seed", models.IntegerField(default=0)),
                ("mode", models.CharField(default="agent", max_length=20)),
                ("ablations", models.JSONField(blank=True, default=list, help_text="parts switched off: memory, planning, …")),
                ("repeats", models.PositiveSmallIntegerField(default=1)),
                ("concurrency", models.PositiveSmallIntegerField(default=1)),
                ("config", models.JSONField(blank=True, default=dict, help_text="the AgentConfig every run of this evaluation gets")),
                ("dataset", models.JSONField(blank=True, default=dict, help_text="how the triples were drawn (counts, sampling)")),
                (
                    "status",
                    models.CharField(
                        choices=[("created", "Created"), ("running", "Running"), ("interrupted", "Interrupted"), ("finished", "Finished")],
                        db_index=True,
                        default="created",
                        max_length=12,
                    ),
                ),
                ("metrics", models.JSONField(blank=True, default=dict)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("started_at", models.DateTimeField(blank=True, null=True)),
                ("finished_at", models.DateTimeField(blank=True, null=True)),
                ("heartbeat_at", models.DateTimeField(blank=True, null=True)),
                (
                    "created_by",
                    models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to=settings.AUTH_USER_MODEL),
                ),
                (
                    "kg",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT, related_name="evaluations", to="verifier.knowledgegraph"
                    ),
                ),
            ],
            options={
                "ordering": ["-created_at", "-id"],
            },
        ),
        migrations.CreateModel(
            name="EvaluationItem",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("repeat", models.PositiveSmallIntegerField(default=0)),
                ("expected_label", models.BooleanField()),
                ("position", models.PositiveIntegerField(default=0, help_text="order of the triple in the drawn sample")),
                ("attempts", models.PositiveSmallIntegerField(default=0)),
                (
                    "evaluation",
                    models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="items", to="verifier.evaluation"),
                ),
                (
                    "run",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="evaluation_items",
                        to="verifier.run",
                    ),
                ),
                (
                    "task",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="evaluation_items", to="verifier.verificationtask"
                    ),
                ),
            ],
            options={
                "ordering": ["evaluation", "position", "repeat"],
                "constraints": [models.UniqueConstraint(fields=("evaluation", "task", "repeat"), name="evaluation_item_unique")],
            },
        ),
    ]
