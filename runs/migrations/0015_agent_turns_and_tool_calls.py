# The record of agent steps: their model turns and tool calls. New tables only.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("runs", "0014_step_approval_waiting_idx"),
    ]

    operations = [
        migrations.CreateModel(
            name="AgentTurn",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True,
                                           serialize=False, verbose_name="ID")),
                ("index", models.PositiveIntegerField()),
                ("content", models.TextField(blank=True)),
                ("tool_calls", models.JSONField(default=list)),
                ("finish_reason", models.CharField(blank=True, max_length=40)),
                ("model_ref", models.CharField(blank=True, max_length=200)),
                ("prompt_tokens", models.PositiveIntegerField(default=0)),
                ("completion_tokens", models.PositiveIntegerField(default=0)),
                ("created_at", models.DateTimeField()),
                ("step", models.ForeignKey(db_index=False,
                                           on_delete=django.db.models.deletion.CASCADE,
                                           related_name="agent_turns", to="runs.step")),
            ],
            options={
                "ordering": ["step_id", "index"],
                "constraints": [models.UniqueConstraint(fields=("step", "index"),
                                                        name="agentturn_unique_step_index")],
            },
        ),
        migrations.CreateModel(
            name="ToolCall",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True,
                                           serialize=False, verbose_name="ID")),
                ("turn", models.PositiveIntegerField()),
                ("index", models.PositiveIntegerField()),
                ("call_id", models.CharField(max_length=200)),
                ("tool", models.CharField(max_length=200)),
                ("kind", models.CharField(blank=True, max_length=16)),
                ("impact", models.CharField(blank=True, max_length=8)),
                ("arguments", models.JSONField(blank=True, null=True)),
                ("args_hash", models.CharField(max_length=64)),
                ("status", models.CharField(choices=[
                    ("pending", "Pending"), ("running", "Running"), ("scheduled", "Scheduled"),
                    ("succeeded", "Succeeded"), ("failed", "Failed"), ("unknown", "Unknown"),
                    ("invalid", "Invalid"), ("waiting", "Waiting"), ("declined", "Declined"),
                    ("compensating", "Compensating"), ("compensated", "Compensated"),
                    ("compensation_failed", "Compensation Failed")],
                    default="pending", max_length=32)),
                ("idempotency_key", models.CharField(max_length=64)),
                ("compensation_key", models.CharField(blank=True, max_length=64)),
                ("attempt", models.PositiveIntegerField(default=0)),
                ("lookup_failures", models.PositiveIntegerField(default=0)),
                ("compensation_attempt", models.PositiveIntegerField(default=0)),
                ("approved_hash", models.CharField(blank=True, max_length=64)),
                ("approved_by", models.CharField(blank=True, max_length=200)),
                ("remote_ref", models.CharField(blank=True, max_length=300)),
                ("compensation_ref", models.CharField(blank=True, max_length=300)),
                ("result", models.JSONField(blank=True, null=True)),
                ("error_class", models.CharField(blank=True, max_length=16)),
                ("error_message", models.TextField(blank=True)),
                ("next_attempt_at", models.DateTimeField(blank=True, null=True)),
                ("started_at", models.DateTimeField(blank=True, null=True)),
                ("finished_at", models.DateTimeField(blank=True, null=True)),
                ("updated_at", models.DateTimeField()),
                ("step", models.ForeignKey(db_index=False,
                                           on_delete=django.db.models.deletion.CASCADE,
                                           related_name="tool_calls", to="runs.step")),
            ],
            options={
                "ordering": ["step_id", "turn", "index"],
                "indexes": [
                    models.Index(fields=["idempotency_key"], name="toolcall_key_idx"),
                    models.Index(condition=models.Q(("status__in", ["unknown", "waiting"])),
                                 fields=["step"], name="toolcall_unsettled_idx"),
                ],
                "constraints": [models.UniqueConstraint(
                    fields=("step", "turn", "index"), name="toolcall_unique_step_turn_index")],
            },
        ),
    ]
