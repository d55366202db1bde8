from django.contrib import admin

from .models import AuditRecord


class ReadOnlyAdmin(admin.ModelAdmin):
    """For records that only their own code may write: admins look, never add, edit or
    delete (the audit trail, runs that change only through transitions, a ledger)."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(AuditRecord)
class AuditRecordAdmin(ReadOnlyAdmin):
    """Append-only: visible to admins, never editable."""

    list_display = ["created_at", "run", "seq", "action", "step_name", "actor_label", "reason"]
    list_filter = ["action", "actor_kind"]
    search_fields = ["actor_label", "reason", "step_name", "=run__id"]
    list_select_related = ["run"]
