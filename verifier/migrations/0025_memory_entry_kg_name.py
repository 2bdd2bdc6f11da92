# The memory bank records the KG a case was investigated on by name, so that it travels with exports and
# survives on an installation where that KG is not loaded; entries linked to a KG take its name.

from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def name_linked_entries(apps, schema_editor):
    MemoryEntry = apps.get_model("verifier", "MemoryEntry")
    KnowledgeGraph = apps.get_model("verifier", "KnowledgeGraph")
    MemoryEntry.objects.filter(kg__isnull=False).update(
        kg_name=Subquery(KnowledgeGraph.objects.filter(pk=OuterRef("kg_id")).values("name")[:1]))


class Migration(migrations.Migration):

    dependencies = [
        ("verifier", "0024_support_items_in_the_order_found"),
    ]

    operations = [
        migrations.AddField(
            model_name="memoryentry",
            name="kg_name",
            field=models.CharField(blank=True, db_index=True, max_length=100,
                                   help_text="the name of the KG the case was investigated on (kg: that KG, where it is loaded)"),
        ),
        migrations.RunPython(name_linked_entries, migrations.RunPython.noop),
    ]
