from django.contrib import admin

from .models import AuditRecord


@admin.register(AuditRecord)
class AuditRecordAdmin(admin.ModelAdmin):
    """Append-only: visible to admins, never editable."""

    list_display = ["created_at", "run", "seq", "action", "step_name", "actor_label", "reason"]
    list_filter = ["action", "actor_kind"]
    search_fields = ["actor_label", "reason", "step_name", "=run__id"]
    list_select_related = ["run"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
