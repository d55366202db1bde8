from django.contrib import admin

from audit.admin import ReadOnlyAdmin, choices_filter
from runs.admin import RunSearchAdmin
from runs.admin_search import NUMBER, IndexedSearchAdmin

from .models import ApprovalRequest, Notification, NotificationKind, NotificationStatus


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
class ApprovalRequestAdmin(RunSearchAdmin):
    """Read-only: requests change only through approvals.decisions and the sweep (schedule).
    The search finds the requests of the runs the console's search finds."""

    list_display = ["id", "run", "kind", "step_name", "action", "status", "escalation_level",
                    "requested_at", "due_at", "decided_by_label", "decided_at", "settled_at"]
    list_filter = ["status", "kind"]
    list_select_related = ["run"]
    ordering = ["-id"]
    inlines = [NotificationInline]


@admin.register(Notification)
class NotificationAdmin(IndexedSearchAdmin, ReadOnlyAdmin):
    """The outbox: read-only; the sweeper's publisher delivers and retries. A search names a
    request's id, along the index of the request foreign key."""

    list_display = ["id", "request", "kind", "recipient", "status", "attempts",
                    "next_attempt_at", "sent_at", "provider_message_id", "last_error"]
    list_filter = [choices_filter("status", "status", NotificationStatus.values),
                   choices_filter("kind", "kind", NotificationKind.values)]
    indexed_search = (("request", NUMBER),)
    list_select_related = ["request"]
    ordering = ["-id"]
