"""Approval reads: the approver's inbox and the request a page shows."""

from dataclasses import dataclass
from datetime import datetime

from django.db.models import (
    BooleanField,
    Case,
    ExpressionWrapper,
    F,
    Q,
    QuerySet,
    When,
)
from django.db.models.functions import Now

from runs import store
from runs.machine.intentions import step_lines
from runs.operator.actions import ACTIONS
from runs.reads.cursors import keyset_after
from runs.reads.step_rows import steps_in_order

from .models import (
    BULK_JOB_REQUESTS,
    DECIDE_PERMISSION,
    ApprovalRequest,
    RequestKind,
    RequestStatus,
)
from .notifications import time_text, without_bulk_params
from .paging import Page, page_window
from .permissions import granted_to, reaching_only, still_approver_of
from .timeouts import is_due, timed_out


def decidable_by(user) -> QuerySet[ApprovalRequest]:
    """Pending requests `user` may decide, by the rule in approvals.permissions, as one
    query: superusers and holders of the global permission see every pending request,
    others those their object permissions (their own or their groups') cover, an operator
    action's only while they still may decide it (still_an_approver); never one they asked
    for themselves (four eyes)."""
    pending = ApprovalRequest.objects.filter(status=RequestStatus.PENDING)
    if not user.is_authenticated or not user.is_active:
        return pending.none()
    if not (user.is_superuser or user.has_perm(DECIDE_PERMISSION)):
        pending = pending.filter(granted_to(user)).filter(
            ~Q(kind=RequestKind.OPERATOR_ACTION) | still_approver_of(user))
    return pending.filter(~Q(requested_by=user) | Q(requested_by__isnull=True))


# The inbox's order, and the columns of its keyset cursor: (due_at, requested_at, id).
INBOX_ORDER = ("due_at", "requested_at", "pk")


def inbox(user, *, now: datetime | None = None) -> QuerySet[ApprovalRequest]:
    """What waits for `user`: the requests they may decide, the earliest due (so the
    overdue) first, with their runs, in one query; each says whether it is `overdue` by the
    database's clock (overdue_by_the_database)."""
    return (decidable_by(user).select_related("run").order_by(*INBOX_ORDER)
            .annotate(overdue=overdue_by_the_database()))


def overdue_by_the_database() -> ExpressionWrapper:
    """Whether a request is past its due time by the database's clock in the query, as the
    sweep and a decision judge it (approvals.timeouts.judged_at): not this process's
    estimate, which runs ahead or behind for a while after its host's clock stepped, and
    would mark overdue a request a decision would still find on time, or the other way."""
    return ExpressionWrapper(Q(due_at__lte=Now()), output_field=BooleanField())


def inbox_page(user, *, workflows: list[str] | None = None, after: tuple | None = None,
               limit: int) -> tuple[list[ApprovalRequest], tuple | None]:
    """One page of `user`'s inbox (among the requests reaching only `workflows`: an API
    token's, approvals.permissions.reaching_only; None, the console's, for all of them), in
    the inbox's order, past the request whose (due_at, requested_at, id) is `after`, and the
    cursor of the next page (None on the last). Keyset paging: page N costs one query as
    page 1 does, and a request decided between two pages (gone from the inbox) makes the
    next page skip none, where an offset would skip the one that took its place."""
    # A bulk job's request is listed by its count of runs, not read with every one of them.
    requests = without_bulk_lists(inbox(user))
    if workflows is not None:
        requests = requests.filter(reaching_only(workflow_names=workflows))
    if after is not None:
        requests = keyset_after(requests, INBOX_ORDER, after)
    rows = [as_read(approval) for approval in requests[:limit + 1]]
    if len(rows) <= limit:
        return rows, None
    last = rows[limit - 1]
    return rows[:limit], (last.due_at, last.requested_at, last.pk)


def is_overdue(approval: ApprovalRequest, now: datetime | None = None) -> bool:
    """Whether `approval` is pending past its due time, by the clock the sweep and a
    decision judge that by (the database's, overdue_by_the_database; a time the caller
    gives stands in for it): the page must not offer as on time a request a decision would
    find timed out."""
    if not approval.is_pending:
        return False
    if now is not None:
        return is_due(approval, now)
    return ApprovalRequest.objects.filter(pk=approval.pk).annotate(
        overdue=overdue_by_the_database()).values_list("overdue", flat=True).first() or False


def timeout_outcome(approval: ApprovalRequest, *, name_deputies: bool = False) -> str:
    """What the timeout that ended `approval` did, in a sentence for the person who opens
    its link or its page; "" for a request no timeout ended (approvals.timeouts).

    The deputies an escalation reached are named only with `name_deputies`, for the
    request page, which only a person allowed to see the request reaches: the link's page
    is shown to whoever holds the link, signed in or not, and must not tell who decides."""
    if not timed_out(approval):
        return ""
    deputies = ""
    if approval.escalation_level:
        deputies = (f" (after escalation to {', '.join(approval.escalate_to)})"
                    if name_deputies else " (after escalation to its deputies)")
    ended = ("rejected it" if approval.status == RequestStatus.REJECTED
             else "ended it without a decision")
    return (f"Nobody decided it by {time_text(approval.due_at)}{deputies}, so its timeout "
            f"policy ({approval.on_timeout}) {ended}: {_timeout_effect(approval)}.")


def _timeout_effect(approval: ApprovalRequest) -> str:
    # What approvals.decisions applies for a timeout, by kind; an application the run
    # refused or has not taken yet is said instead, as the page's "applied" row says it.
    if approval.settled_at is None:
        return "the run has not taken it yet; the sweeper tries again"
    if approval.apply_error:
        return f"it could not be applied to the run ({approval.apply_error})"
    if approval.kind == RequestKind.OPERATOR_ACTION:
        return "the operator action was not taken"
    if approval.kind == RequestKind.TOOL_CALL:
        return "the tool call was declined: it never runs, and the model was told"
    if approval.status == RequestStatus.REJECTED:
        return "its step failed and the run went to attention for an operator"
    return "the run went to attention for an operator to decide what happens"


def requests_for_run(run) -> list[ApprovalRequest]:
    """A run's approval requests, newest first (the run page lists them), a bulk job's
    without its lists of runs (without_bulk_lists): the page lists it by its count, as the
    inbox does, and a job's request hangs on one of its runs."""
    return [as_read(approval) for approval in without_bulk_lists(
        ApprovalRequest.objects.filter(run=run).select_related("decided_by")
        .order_by("-requested_at", "-pk"))]


def what_follows(approval: ApprovalRequest, *, awaited: bool) -> list[str]:
    """What an approval sets off, in words, for the person deciding: for an approval step,
    what each later step of the run will do; for an operator's action, what the action
    does to this run. Nothing once the request can no longer be decided (decided, timed
    out, superseded, withdrawn, or not `awaited` and being closed): it would be told from
    the run as it is now, not as it was asked about, and a re-run approved and applied read
    as one of a run where nothing stands, beside the decision that sent it again."""
    if not approval.is_pending or not awaited:
        return []
    run = approval.run
    steps = list(steps_in_order(run=run))
    if approval.kind == RequestKind.OPERATOR_ACTION:
        action = ACTIONS.get(approval.action)
        if action is None:
            return []
        if approval.is_bulk:
            return _bulk_follows(approval, action)
        # Told to the second person: what their approval lets happen to this run, not the
        # asker's "your request goes to a second person".
        asked_by = approval.snapshot.get("requested_by", "")
        return [f"Approved: {action.label.lower()} is taken on this run, as {asked_by} asked, "
                f"if they may still {action.label.lower()} it and its state still allows it.",
                *action.explain(run, steps, asking=False,
                                step=dict(approval.params).get("step", "")),
                "Rejected: nothing is done to the run."]
    lines = step_lines(run, steps)
    position = next((s.position for s in steps if s.name == approval.step_name), None)
    if position is None:
        return []
    later = [f"{s.name}: {lines[s.name]}" + (" (high impact)" if s.impact == "high" else "")
             for s in steps if s.position > position]
    if approval.kind == RequestKind.TOOL_CALL:
        return [*_tool_call_follows(approval), *(
            [f"Once the agent {approval.step_name} finishes, the run goes on:"] + later
            if later else [])]
    return later


def _bulk_follows(approval: ApprovalRequest, action) -> list[str]:
    # What approvals.bulk_approved does: the action on each run of the job that
    # waited for a second person, not on the run the request hangs on alone (whose own
    # state, explained, would say nothing of the others).
    count, asked_by = approval.bulk_run_count, approval.snapshot.get("requested_by", "")
    return [
        f"Approved: {action.label.lower()} is taken on each of the {count} runs listed, "
        f"as {asked_by} asked, on each run they may still {action.label.lower()} and whose "
        "state still allows it; the bulk job's page says what became of each run.",
        f"{action.label}, on each run: {action.summary}",
        "Rejected: none of the runs is touched.",
    ]


def _tool_call_follows(approval: ApprovalRequest) -> list[str]:
    snapshot, call = approval.snapshot, approval.tool_call
    tool, system = snapshot.get("tool", "?"), snapshot.get("system", "-")
    key = f" with its own idempotency key {call.idempotency_key[:12]}…" if call else ""
    return [
        f"Approved: {tool} runs once, with exactly these arguments{key}"
        + (f", against {system}" if system != "-" else "")
        + f"; its result goes back to the model, which chooses the next step of "
          f"{approval.step_name}.",
        f"Rejected: {tool} never runs; the model is told it was declined, with your "
        "comment.",
        "If the model proposes other arguments, this request is replaced and cannot be "
        "approved.",
    ]


# Of a bulk job's request, how many runs its page lists at a time, each with its high-impact
# effects: listing them all made the page of a job of ten thousand runs megabytes long.
PAGE_RUNS_LISTED = 50


# What a bulk job's request holds whole that its page shows a part of (bulk_runs_page): its
# runs, in its params and its snapshot, and their high-impact effects.
RUNS, EFFECTS, PARAMS_RUNS = ("runs",), ("high_impact_effects",), ("params", "runs")


def without_bulk_lists(requests: QuerySet[ApprovalRequest]) -> QuerySet[ApprovalRequest]:
    """`requests` read without the lists of runs and of their effects that a bulk job's
    request holds whole in its params and snapshot (megabytes for a job of 100,000 runs),
    which the database counts instead (ApprovalRequest.bulk_run_count); any other request is
    read whole. Each row read is to be passed through as_read."""
    db = store.current()

    def bulk_only(expression, whole: str):
        return Case(When(BULK_JOB_REQUESTS, then=expression), default=F(whole))

    return requests.defer("params", "snapshot").annotate(
        params_read=bulk_only(db.json_with(F("params"), removed=[RUNS]), "params"),
        snapshot_read=bulk_only(db.json_with(F("snapshot"), removed=[RUNS, EFFECTS, PARAMS_RUNS]),
                                "snapshot"),
        runs_counted=Case(When(BULK_JOB_REQUESTS, then=db.json_array_length(F("params"), RUNS))))


def as_read(approval: ApprovalRequest) -> ApprovalRequest:
    """A request read by without_bulk_lists, its params and snapshot as read."""
    approval.params, approval.snapshot = approval.params_read, approval.snapshot_read
    return approval


def request_for_page(pk: int) -> ApprovalRequest | None:
    """Request `pk` as its page reads it, with its run, the request that replaced it and its
    tool call, a bulk job's without its lists (without_bulk_lists): the page reads the part
    it shows (bulk_runs_page)."""
    approval = without_bulk_lists(
        ApprovalRequest.objects.select_related("run", "superseded_by", "tool_call")
        .defer("superseded_by__params", "superseded_by__snapshot")).filter(pk=pk).first()
    return None if approval is None else as_read(approval)


@dataclass(frozen=True)
class BulkRunsPage(Page):
    """One page of the runs a bulk job's request acts on: the request's snapshot as the
    page shows it (these runs and their effects)."""

    snapshot: dict


def bulk_runs_page(approval: ApprovalRequest, number: int | None) -> BulkRunsPage | None:
    """Page `number` (from 1; None, or past either end: the nearest page) of the runs of
    bulk job request `approval`, PAGE_RUNS_LISTED at a time, with their effects; None for a
    request of another kind. Every other part of the snapshot is shown whole; its params
    do not repeat the runs. The hash, shown beside it, is of the whole snapshot. The
    database takes the page's part of the snapshot (two queries of a page each): the
    snapshot is never read whole."""
    if not approval.is_bulk:
        return None
    db, count = store.current(), approval.bulk_run_count
    number, pages, start = page_window(count, PAGE_RUNS_LISTED, number)
    row = ApprovalRequest.objects.filter(pk=approval.pk)
    listed = row.annotate(part=db.json_array_part(
        F("snapshot"), RUNS, start=start, stop=start + PAGE_RUNS_LISTED)) \
        .values_list("part", flat=True).get()
    snapshot = row.annotate(part=db.json_with(F("snapshot"), removed=[PARAMS_RUNS], replaced={
        RUNS: listed, EFFECTS: db.json_array_part(
            F("snapshot"), EFFECTS, heads=[f"run {run_id}" for run_id in listed])})) \
        .values_list("part", flat=True).get()
    if not isinstance(snapshot, dict):
        return None
    without_bulk_params(snapshot)
    return BulkRunsPage(snapshot=snapshot, number=number, pages=pages, first=start + 1,
                        last=start + len(listed), count=count)
