"""Runs, their steps, agent turns, tool calls and approval waits in Django admin: evidence,
so read-only (they change only through runs.machine.transitions, the console's actions), and read
along indexes at a million runs. A search finds runs through the console's own search
(runs.reads.search.search_branches), so admin and console cannot disagree about what matches."""

import json
from datetime import timedelta
from functools import cache

from django.contrib import admin, messages
from django.db import connection
from django.db.models import DateTimeField, F, IntegerField, Q
from django.http import HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html
from guardian.admin import GuardedModelAdmin

from audit.access import AccessAction
from audit.actions import ROUTINE_ACTIONS, AuditAction
from audit.admin import IndexedOrderChangeList, ReadOnlyAdmin, StorableFiltersAdmin, choices_filter
from audit.models import AccessRecord, AuditRecord
from audit.redaction import sealed_masked

from .admin_search import EXACT, PREFIX, IndexedSearchAdmin
from .agent_models import AgentTurn, ToolCall
from .definitions.definition import AGENT
from .machine import sensitive
from .models import (
    ATTENTION_RUN_STATUSES,
    ApprovalWait,
    AttentionReason,
    ExternalEvent,
    Run,
    Step,
    Workflow,
)
from .reads.agent_selectors import declared_tool
from .reads.search import key_matches, search_branches
from .world_models import EVENT_STATES

# A search by the start of a business key can match every run; the admin lists the newest
# this many of each way of matching, as the console pages through the newest first.
SEARCH_CAP = 1000


def searched_run_ids(q: str):
    """The ids of the runs the console's search finds for `q` (the newest SEARCH_CAP of each
    way of matching), as a subquery on PostgreSQL, a list elsewhere (SQLite, the demo)."""
    branches = [b.order_by("-updated_at", "-pk").values_list("pk", flat=True)[:SEARCH_CAP]
                for b in search_branches(Run.objects.all(), q)]
    if connection.features.supports_slicing_ordering_in_compound:
        return branches[0].union(*branches[1:])
    return [pk for branch in branches for pk in branch]


def searched_step_ids(run_ids, kind: str) -> list[int]:
    """The ids of the steps of kind `kind` of the runs `run_ids`, each run's along
    step_unique_run_name: the runs a search found have a few each."""
    return list(Step.objects.filter(run_id__in=run_ids, kind=kind)
                .values_list("pk", flat=True))


def sorted_not_walked(opts, item):
    """An ordering `item` ("-updated_at", "pk") of `opts`'s model as an expression no index
    is in the order of (the column plus nothing), so that PostgreSQL sorts the rows it
    found rather than walking an index in that order. An item of another kind (an
    expression, a text column) is returned as it is."""
    if not isinstance(item, str):
        return item
    name = item.removeprefix("-")
    field = opts.pk if name == "pk" else opts.get_field(name)
    if isinstance(field, DateTimeField):
        nothing = timedelta(0)
    elif isinstance(field, IntegerField):
        nothing = 0
    else:
        return item
    column = F(field.name) + nothing
    return column.desc() if item.startswith("-") else column.asc()


class FoundRowsChangeList(IndexedOrderChangeList):
    """A searched list sorts the rows its search found. PostgreSQL would otherwise walk the
    table in the list's order (newest first) and keep the rows of the runs found, expecting
    them everywhere; the runs found can be old ones, their rows at the far end of the walk,
    so a search for them read the whole table (990,000 audit records for one old run's
    key). The rows of the runs found are few (SEARCH_CAP runs at most), each read along
    its run's index."""

    def get_ordering(self, request, queryset):
        ordering = super().get_ordering(request, queryset)
        if not self.query.strip():
            return ordering
        return [sorted_not_walked(self.lookup_opts, item) for item in ordering]


class RunSearchAdmin(ReadOnlyAdmin):
    """An admin whose search box finds rows of the runs the console's search finds, through
    `run_path` (the lookup from the row to its run), or, for rows of steps of the kind
    `step_kind`, through their steps' ids; with `searches_keys` (rows of steps), also rows
    whose idempotency key the term names as the console's search does (along the key index).

    Rows of steps are asked for by step id, not through a join to the steps of the runs
    found: PostgreSQL, expecting a few percent of the steps and rows on each, read the whole
    table of rows (a million agent turns for the 200 of a search's thousand runs) and matched
    it against the steps. Given the agent steps' ids, it reads the rows of those steps along
    the table's unique index, which leads with the step; a key is a column of the same
    table, so the two are one OR it answers with a scan of each index."""

    run_path = "run"
    step_kind = ""
    searches_keys = False
    # Django admin shows the search box only when search_fields is set; the fields
    # themselves are not used (get_search_results below replaces Django's LIKE '%q%').
    search_fields = ["-"]
    search_help_text = ("The console's search: the start of a business key, an idempotency "
                        "key, a remote or compensation reference, or a run id.")

    def get_changelist(self, request, **kwargs):
        return FoundRowsChangeList

    def get_search_results(self, request, queryset, search_term):
        q = search_term.strip()
        if not q:
            return queryset, False
        run_ids = list(searched_run_ids(q))
        if self.step_kind:
            found = Q(step_id__in=searched_step_ids(run_ids, self.step_kind))
        elif self.run_path:
            found = Q(**{f"{self.run_path}__in": run_ids})
        else:
            found = Q(pk__in=run_ids)
        if self.searches_keys:
            found |= Q(*key_matches(q))
        return queryset.filter(found), False


def workflow_names() -> list[str]:
    return list(Workflow.objects.order_by("name").values_list("name", flat=True))


class AttentionReasonFilter(admin.SimpleListFilter):
    """Runs in attention for one reason, along run_attention_keyset_idx: a reason is set only
    while a run is in attention, so saying so lets PostgreSQL use the attention index."""

    title = "attention reason"
    parameter_name = "attention_reason"

    def lookups(self, request, model_admin):
        return AttentionReason.choices

    def queryset(self, request, queryset):
        if not self.value():
            return queryset
        return queryset.filter(status__in=ATTENTION_RUN_STATUSES,
                               attention_reason=self.value())


@admin.register(Workflow)
class WorkflowAdmin(StorableFiltersAdmin, GuardedModelAdmin):
    """A workflow's row is made by the runtime (start_run, by name) and is what object
    permissions attach to: its page shows it and leads to who may do what on it, changed
    only through the audited permission forms. Nothing of the row itself is changed here:
    renamed, the next start_run of the old name would make a new row holding no grant, and
    everyone granted on the old one would lose the new runs, unrecorded."""

    list_display = ["name", "created_at"]
    search_fields = ["name"]
    readonly_fields = ["name", "created_at"]

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        # Runs hold on to their workflow's row, and the permissions on it say who may act.
        return False

    def change_view(self, request, object_id, form_url="", extra_context=None):
        # The change permission stays (guardian's forms and the role form ask for it), but
        # the row has no field a save could change: no save button to suggest otherwise.
        return super().change_view(request, object_id, form_url, {
            **(extra_context or {}), "show_save": False, "show_save_and_continue": False,
            "show_save_and_add_another": False})

    def save_model(self, request, obj, form, change):
        # Every field is read-only: a POST of the change form writes nothing to the row.
        return


class StepInline(admin.TabularInline):
    model = Step
    extra = 0
    can_delete = False
    fields = ["position", "name", "kind", "impact", "status", "attempt", "idempotency_key",
              "remote_ref", "error_class", "error_message", "next_attempt_at"]
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Run)
class RunAdmin(RunSearchAdmin):
    """Read-only: runs change only through runs.machine.transitions (the console's actions)."""

    run_path = ""
    list_display = ["id", "workflow_name", "business_key", "status", "attention_reason",
                    "current_step", "updated_at", "console_link"]
    list_filter = ["status", AttentionReasonFilter,
                   choices_filter("workflow", "workflow_name", workflow_names)]
    # The console's order, along run_updated_idx (and run_status_updated_idx when filtered).
    ordering = ["-updated_at", "-id"]
    sortable_by = ["id", "updated_at"]
    inlines = [StepInline]

    @admin.display(description="console")
    def console_link(self, run):
        return format_html('<a href="{}">open in the console</a>', console_run_url(run.pk))


@cache
def _console_run_path() -> str:
    return reverse("console:run", args=[987654321]).replace("987654321", "{}")


def console_run_url(run_id: int) -> str:
    """The console's page of run `run_id`: reverse() once, not once per row of a list
    (fifty reverses cost the runs list about a tenth of its time)."""
    return _console_run_path().format(int(run_id))


def _run_link(run_id):
    return format_html('<a href="{}">run {}</a>', console_run_url(run_id), run_id)


@admin.register(ToolCall)
class ToolCallAdmin(RunSearchAdmin):
    """An agent's tool calls: evidence of what was sent where; they change only through
    the transitions (the console's tool-call actions)."""

    step_kind = AGENT
    searches_keys = True
    list_display = ["id", "run", "step_name", "generation", "ref", "tool", "impact", "status",
                    "attempt", "remote_ref", "error_class", "updated_at"]
    # No filter by status: no index may hold a call's status (its every checkpoint would then
    # write an entry into each index of the table instead of updating the row in place, as
    # for steps, runs.migrations 0016), and without one a filter on a status few calls have
    # reads the whole table. The calls a person must look at are in the console's attention
    # list, with their runs.
    list_select_related = ["step"]
    ordering = ["-id"]
    sortable_by = ["id"]
    # Shown as the console shows them (runs.machine.sensitive.shown), never as
    # stored: the row keeps what the call runs with, a credential the model passed or the
    # tool returned included.
    exclude = ["arguments", "result"]
    readonly_fields = ["shown_arguments", "shown_result"]

    @admin.display(description="run")
    def run(self, call):
        return _run_link(call.step.run_id)

    @admin.display(description="step")
    def step_name(self, call):
        return call.step.name

    @admin.display(description="arguments")
    def shown_arguments(self, call):
        return json.dumps(sensitive.shown(declared_tool(call), call.arguments), indent=2)

    @admin.display(description="result")
    def shown_result(self, call):
        if call.result is None:
            return "-"
        return json.dumps(sensitive.shown(declared_tool(call), call.result), indent=2)


@admin.register(AgentTurn)
class AgentTurnAdmin(RunSearchAdmin):
    """Each stored answer of the model: reused on replay, never asked again, never edited."""

    step_kind = AGENT
    list_display = ["id", "run", "step_name", "generation", "index", "finish_reason",
                    "model_ref", "prompt_tokens", "completion_tokens", "created_at"]
    list_select_related = ["step"]
    ordering = ["-id"]
    sortable_by = ["id"]
    # The text as written, sealed for the model alone: people read the content, masked.
    exclude = ["sealed_content"]

    @admin.display(description="run")
    def run(self, turn):
        return _run_link(turn.step.run_id)

    @admin.display(description="step")
    def step_name(self, turn):
        return turn.step.name


@admin.register(ApprovalWait)
class ApprovalWaitAdmin(RunSearchAdmin):
    """What runs wait on a person for now: written and removed by the transitions."""

    list_display = ["id", "run_link", "step_name", "tool_call", "created_at", "open_failures",
                    "failing_since"]
    list_select_related = ["tool_call"]
    ordering = ["-id"]
    sortable_by = ["id"]

    @admin.display(description="run")
    def run_link(self, wait):
        return _run_link(wait.run_id)


# The actions audit_uncommon_action_idx holds, which the audit records' list filters on.
UNCOMMON_ACTIONS = sorted(a.value for a in AuditAction if a not in ROUTINE_ACTIONS)

# Said when a list's address filters on a routine action.
ROUTINE_FILTER_REFUSED = (
    "The records of a routine action ({}) are most of the log and no index holds them by "
    "action: the list filters on the other actions only, and is shown without that filter.")


@admin.register(AuditRecord)
class AuditRecordAdmin(RunSearchAdmin):
    """Append-only: visible to admins, never editable. Newest first, along the primary key.
    A filter by action offers the uncommon ones, along audit_uncommon_action_idx: a routine
    action this deployment writes rarely (an agent's, where no agent runs) was found by
    reading the whole log. The records of people (actor kind "user") are found along
    audit_person_idx."""

    list_display = ["created_at", "run_link", "seq", "action", "step_name", "actor_label",
                    "reason"]
    list_filter = [choices_filter("action", "action", UNCOMMON_ACTIONS), "actor_kind"]
    ordering = ["-id"]
    # Its before, after and data shown as the run page shows them (audit.redaction.
    # sealed_masked): a sealed value a record keeps (a late result's) as the mask, never its
    # ciphertext. The hashes stay shown; the console's CSV export carries the record as
    # written, to be re-hashed.
    fields = ["run", "seq", "action", "step_name", "actor_kind", "actor_label",
              "actor_user_id", "reason", "shown_before", "shown_after", "shown_data",
              "created_at", "prev_hash", "hash"]
    readonly_fields = ["shown_before", "shown_after", "shown_data"]

    def changelist_view(self, request, extra_context=None):
        action = request.GET.get("action", "")
        if action in ROUTINE_ACTIONS:
            self.message_user(request, ROUTINE_FILTER_REFUSED.format(action), messages.ERROR)
            return HttpResponseRedirect(request.path)
        return super().changelist_view(request, extra_context)

    @admin.display(description="run")
    def run_link(self, record):
        return _run_link(record.run_id)

    @admin.display(description="before")
    def shown_before(self, record):
        return _shown_json(record.before)

    @admin.display(description="after")
    def shown_after(self, record):
        return _shown_json(record.after)

    @admin.display(description="data")
    def shown_data(self, record):
        return _shown_json(record.data)


def _shown_json(value) -> str:
    return json.dumps(sealed_masked(value), indent=2, sort_keys=True, ensure_ascii=False,
                      default=str)


@admin.register(AccessRecord)
class AccessRecordAdmin(IndexedSearchAdmin, ReadOnlyAdmin):
    """The access chain: grants, revocations, staff status and API tokens, never editable.
    Here rather than in audit.admin for its search, whose reading of a number is runs'
    (runs.machine.storable.whole_number), below which audit sits. A search names an actor
    (exactly, as the console's audit page filters) or the start of a subject ("user bob"
    finds bob's records on every workflow), along access_actor_idx and access_subject_idx."""

    list_display = ["created_at", "seq", "action", "subject", "actor_label", "reason",
                    "before", "after"]
    list_filter = [choices_filter("action", "action", [a.value for a in AccessAction])]
    indexed_search = (("actor_label", EXACT), ("subject", PREFIX))
    ordering = ["-seq"]
    sortable_by = ["seq"]


class EventStateFilter(admin.SimpleListFilter):
    """External events by what became of them (ExternalEvent.state); the kept and the
    expired ones along the partial indexes that hold them."""

    title = "state"
    parameter_name = "state"
    STATES = EVENT_STATES

    def lookups(self, request, model_admin):
        return [(state, state) for state in self.STATES]

    def queryset(self, request, queryset):
        state = self.STATES.get(self.value() or "")
        return queryset if state is None else queryset.filter(state)


@admin.register(ExternalEvent)
class ExternalEventAdmin(ReadOnlyAdmin):
    """Events from other systems: delivered, kept for the run that will wait for them (until
    keep_until), refused for their run, or expired undelivered (runs.waiting.kept_expiry).
    Evidence: they change only through the door, the transitions and the sweeper."""

    list_display = ["id", "received_at", "workflow_name", "event_name", "correlation_key",
                    "source", "event_id", "shown_state", "keep_until"]
    list_filter = [EventStateFilter,
                   choices_filter("workflow", "workflow_name", workflow_names)]
    ordering = ["-id"]
    sortable_by = ["id"]

    @admin.display(description="state")
    def shown_state(self, event):
        state = event.state
        if state == "delivered" and event.consumed_run_id:
            return format_html("delivered to {}", _run_link(event.consumed_run_id))
        if state == "expired":
            return format_html("expired at {} (kept until {}): never delivered",
                               f"{event.expired_at:%Y-%m-%d %H:%M %Z}",
                               f"{event.keep_until:%Y-%m-%d %H:%M %Z}")
        if state == "refused" and event.refused_run_id:
            return format_html("refused for {}", _run_link(event.refused_run_id))
        return state
