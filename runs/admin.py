from django.contrib import admin
from guardian.admin import GuardedModelAdmin

from audit.admin import ReadOnlyAdmin

from .models import Run, Step, Workflow


@admin.register(Workflow)
class WorkflowAdmin(GuardedModelAdmin):
    list_display = ["name", "created_at"]
    search_fields = ["name"]


class StepInline(admin.TabularInline):
    model = Step
    extra = 0
    can_delete = False
    fields = ["position", "name", "kind", "impact", "status", "attempt", "idempotency_key",
              "remote_ref", "error_class", "error_message", "next_attempt_at"]
    readonly_fields = fields


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    """Read-only: runs change only through runs.transitions (the console's actions)."""

    list_display = ["id", "workflow_name", "business_key", "status", "attention_reason",
                    "current_step", "updated_at"]
    list_filter = ["status", "attention_reason", "workflow_name"]
    search_fields = ["business_key", "=id"]
    inlines = [StepInline]
