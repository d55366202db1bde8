"""The waits of runs for a person (runs.ApprovalWait rows, of approval steps and of agent tool
calls alike) as the approvals app reads them: which have no open request yet, which could
have one, and which a pending request's run still waits on. runs keeps a row for each wait
while it lasts, so these read the waits of the moment, whatever the number of runs and
steps; the sweep (approvals.sweep_scope, requests.open_pending_requests) and withdrawal
(approvals.withdrawal) ask them."""

from django.db.models import Exists, OuterRef, Q, QuerySet

from runs.models import ApprovalWait, Step, StepStatus, ToolCall, ToolCallStatus

from .models import ApprovalRequest, RequestKind


def _open_for_step():
    # The open request of the approval step an ApprovalWait row (the outer query) names.
    return ApprovalRequest.objects.filter(
        run=OuterRef("run"), kind=RequestKind.STEP, step_name=OuterRef("step_name"),
        settled_at__isnull=True)


def _open_for_call():
    # The open request of the tool call an ApprovalWait row (the outer query) names.
    return ApprovalRequest.objects.filter(
        tool_call=OuterRef("tool_call"), kind=RequestKind.TOOL_CALL, settled_at__isnull=True)


def unasked() -> Q:
    """The condition on ApprovalWait rows, of steps and of tool calls alike, that they have
    no open request: the decisions runs wait on that nobody has been asked for yet."""
    return ((Q(tool_call__isnull=True) & ~Exists(_open_for_step()))
            | (Q(tool_call__isnull=False) & ~Exists(_open_for_call())))


def step_still_waiting() -> QuerySet:
    """The step an ApprovalWait or ApprovalRequest row (the outer query) names, if it still
    waits for a person."""
    return Step.objects.filter(run=OuterRef("run"), name=OuterRef("step_name"),
                               status=StepStatus.WAITING)


def call_still_waiting() -> QuerySet:
    """The tool call an ApprovalWait or ApprovalRequest row (the outer query) names, if it
    still waits for a person."""
    return ToolCall.objects.filter(pk=OuterRef("tool_call"), status=ToolCallStatus.WAITING)


def askable() -> Q:
    """The condition on ApprovalWait rows that a request could be made for them: the step
    (or the tool call) they name still waits for a person, which requests.open_request
    and open_tool_call_request check before they make one. (Their run waits too: runs removes a
    run's waits in the transaction in which it stops waiting.) A row failing it names
    nothing anyone could be asked (its step no longer waits, or its run has no such step):
    it can never be asked, and stays until its run stops waiting."""
    return ((Q(tool_call__isnull=True) & Exists(step_still_waiting()))
            | (Q(tool_call__isnull=False) & Exists(call_still_waiting())))


def waits_after(after: int | None) -> QuerySet[ApprovalWait]:
    """The ApprovalWait rows past id `after` (along the primary key), or all of them."""
    waits = ApprovalWait.objects.all()
    return waits if after is None else waits.filter(pk__gt=after)


def unasked_waits(after: int | None = None) -> QuerySet[ApprovalWait]:
    """The waits (past id `after`) that have no open request."""
    return waits_after(after).filter(unasked())


def waiting_approval_steps(limit: int = 200, after: int | None = None):
    """The approval steps runs wait on that have no open request, as ApprovalWait rows
    (run joined), of those past id `after`: runs keeps a row for each wait while it lasts,
    so this reads the waits of the moment, whatever the number of runs and steps."""
    return (waits_after(after).filter(tool_call__isnull=True)
            .filter(~Exists(_open_for_step()))
            .select_related("run").order_by("id")[:limit])


def waiting_tool_calls(limit: int = 200, after: int | None = None):
    """Agent tool calls that runs wait on for a person and that have no open request, from
    the ApprovalWait rows of the moment past id `after` (the calls are not searched)."""
    waits = (waits_after(after).filter(tool_call__isnull=False)
             .filter(~Exists(_open_for_call())).order_by("id").values("tool_call")[:limit])
    return (ToolCall.objects.filter(pk__in=waits)
            .select_related("step", "step__run").order_by("step__run_id", "pk"))
