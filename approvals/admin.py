from django.contrib import admin

from audit.admin import ReadOnlyAdmin

from .models import ApprovalRequest, Notification


class NotificationInline(admin.TabularInline):
    model = Notification
    extra = 0
    can_delete = False
    fields = ["kind", "recipient", "status", "attempts", "next_attempt_at", "sent_at",
              "provider_message_id", "last_error"]
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(ApprovalRequest)
class ApprovalRequestAdmin(ReadOnlyAdmin):
    """Read-only: requests change only through approvals.decisions and the sweep (schedule)."""

    list_display = ["id", "run", "kind", "step_name", "action", "status", "escalation_level",
                    "requested_at", "due_at", "decided_by_label", "decided_at", "settled_at"]
    list_filter = ["status", "kind", "escalation_level"]
    search_fields = ["=id", "=run__id", "run__business_key", "step_name", "action",
                     "decided_by_label", "snapshot_hash"]
    list_select_related = ["run"]
    inlines = [NotificationInline]


@admin.register(Notification)
class NotificationAdmin(ReadOnlyAdmin):
    """The outbox: read-only; the sweeper's publisher delivers and retries."""

    list_display = ["id", "request", "kind", "recipient", "status", "attempts",
                    "next_attempt_at", "sent_at", "provider_message_id", "last_error"]
    list_filter = ["status", "kind"]
    search_fields = ["recipient", "=request__id", "provider_message_id", "message_id"]
    list_select_related = ["request"]
