# A summary turn's transcript artifact (runs.agents.agent_history). A nullable column
# without a default: PostgreSQL adds it to the catalogue only, rewriting no row.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0035_run_listed_step'),
    ]

    operations = [
        migrations.AddField(
            model_name='agentturn',
            name='transcript',
            field=models.JSONField(blank=True, null=True),
        ),
    ]
