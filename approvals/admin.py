from django.contrib import admin
from django.forms.models import BaseInlineFormSet
from django.urls import reverse
from django.utils.html import format_html

from audit.admin import ReadOnlyAdmin, choices_filter
from runs.admin import RunSearchAdmin
from runs.admin_search import NUMBER, IndexedSearchAdmin

from .models import ApprovalRequest, Notification, NotificationKind, NotificationStatus
from .problem_shown import may_see_addresses, without_addresses

# A request's page shows its newest this many notifications: a large approver group reminded
# for days gives one request thousands, and the page rendered every one. The rest are a link
# away, in the outbox's list filtered by the request.
NOTIFICATIONS_SHOWN = 50


class NewestNotificationsFormSet(BaseInlineFormSet):
    """The request's newest NOTIFICATIONS_SHOWN notifications. The slice is taken here: the
    inline formset filters its queryset by the request after the admin hands it over, and a
    sliced queryset can no longer be filtered."""

    def get_queryset(self):
        # Kept: the formset reads its queryset once per form, and a new slice would be a new
        # query each time.
        if not hasattr(self, "_newest"):
            self._newest = super().get_queryset()[:NOTIFICATIONS_SHOWN]
        return self._newest


class NotificationInline(admin.TabularInline):
    model = Notification
    formset = NewestNotificationsFormSet
    ordering = ["-id"]
    verbose_name_plural = f"notifications (the newest {NOTIFICATIONS_SHOWN} at most)"
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
    # Each along its index (approvals 0006): approval_status_idx, approval_kind_idx.
    list_filter = ["status", "kind"]
    list_select_related = ["run"]
    ordering = ["-id"]
    sortable_by = ["id"]
    inlines = [NotificationInline]

    def get_readonly_fields(self, request, obj=None):
        # The count and the link only for those who may see the notifications: the inline
        # and the outbox's list are shown to them alone.
        fields = list(super().get_readonly_fields(request, obj))
        if obj is not None and any(isinstance(inline, NotificationInline)
                                   for inline in self.get_inline_instances(request, obj)):
            fields.append("notifications_in_all")
        if not may_see_addresses(request.user):
            fields.append("problem_without_addresses")
        return fields

    def get_fields(self, request, obj=None):
        # The problem names the addresses a notification failed to reach: whole only for who
        # may see the notifications, as on the run's page (approvals.problem_shown).
        fields = list(super().get_fields(request, obj))
        if "problem_without_addresses" in fields:
            fields.remove("problem_without_addresses")
            fields[fields.index("problem")] = "problem_without_addresses"
        return fields

    @admin.display(description="problem")
    def problem_without_addresses(self, approval_request):
        return without_addresses(approval_request.problem)

    @admin.display(description="notifications")
    def notifications_in_all(self, approval_request):
        # Along the index of the request foreign key: one request's rows, never the outbox.
        total = approval_request.notifications.count()
        shown = "all" if total <= NOTIFICATIONS_SHOWN else f"the newest {NOTIFICATIONS_SHOWN}"
        # A lookup through the foreign key to the request's id, which Django admin accepts
        # from an address without a list filter for it (ModelAdmin.lookup_allowed).
        listed = reverse("admin:approvals_notification_changelist")
        return format_html('{} in all, {} below: <a href="{}?request__id__exact={}">list all {}'
                           ' in the outbox</a>', total, shown, listed, approval_request.pk, total)


@admin.register(Notification)
class NotificationAdmin(IndexedSearchAdmin, ReadOnlyAdmin):
    """The outbox: read-only; the sweeper's publisher delivers and retries. A search names a
    request's id, along the index of the request foreign key."""

    list_display = ["id", "request", "kind", "recipient", "status", "attempts",
                    "next_attempt_at", "sent_at", "provider_message_id", "last_error"]
    # Each along its index (approvals 0006): notification_status_idx, notification_kind_idx.
    list_filter = [choices_filter("status", "status", NotificationStatus.values),
                   choices_filter("kind", "kind", NotificationKind.values)]
    indexed_search = (("request", NUMBER),)
    list_select_related = ["request"]
    ordering = ["-id"]
    sortable_by = ["id"]
