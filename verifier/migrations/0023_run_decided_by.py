"""A weighed run's assessment says what decided its verdict (``decided_by``: the model's answer in the paper
profile, the weighed evidence in the compact profile and the brief modes, verifier/agent/loop.py ``_weighed``),
so that a memory made from the run teaches what decided it (verifier/memory/bank.py ``lesson_of``). Stored runs
get the field by that rule."""

from django.db import migrations

BACKFILL = """
UPDATE verifier_run SET assessment = assessment || jsonb_build_object('decided_by',
    CASE WHEN coalesce(assessment->>'agent_verdict', '') <> '' AND coalesce(config->>'profile', '') <> 'compact'
         THEN 'model' ELSE 'evidence' END)
WHERE jsonb_typeof(assessment->'p_true') = 'number' AND NOT assessment ? 'decided_by'
"""


class Migration(migrations.Migration):
    dependencies = [("verifier", "0022_alter_fittriple_purpose")]
    operations = [migrations.RunSQL(BACKFILL, migrations.RunSQL.noop)]
