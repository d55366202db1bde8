"""Opening approval requests: one for each approval step a run waits on, one for each agent
tool call that waits for a person, and a new one when the payload of a pending request
changed (the old one is superseded: it can never be approved).

runs commits a run that reaches an approval step as: run `waiting`, step `waiting`, audit
record `approval_requested`; a tool call that waits as: run `waiting`, agent step and call
`waiting`, audit record `tool_call_approval_requested`, and in both cases a row in its
ApprovalWait table while the wait lasts. It knows nothing of this app. The sweeper
(approvals.schedule) reads those rows and opens a request for each step and call
here: the request, its approvers' permissions and their notifications in one transaction.

Every function takes an optional `now` so tests drive the schedules with a controlled clock;
all state lives in the database, so a restart changes nothing.
"""

import logging
from datetime import datetime, timedelta

from django.db import IntegrityError, connection, transaction

from audit.actions import AuditAction
from audit.chain import Actor
from runs import store
from runs.definitions import definition
from runs.definitions.contracts import effect_verdict, stop_gate_policy
from runs.machine import sensitive, transitions
from runs.machine.errors import TransitionNotAllowed, classify
from runs.machine.transitions.repeats import earlier_call_may_land, repeat_warning
from runs.models import Run, RunStatus, Step, StepStatus, ToolCall, ToolCallStatus

from . import open_failures
from .models import ApprovalRequest, BulkJob, NotificationKind, RequestKind, RequestStatus
from .notifications import grant_and_notify, request_problem
from .permissions import step_requester, tool_call_requester
from .problem_shown import without_addresses
from .snapshots import (
    SnapshotUnavailable,
    compute_snapshot,
    database_failure,
    normalise,
    registered_workflow,
    snapshot_hash,
    unopened_arguments,
)
from .waits import unasked_waits, waiting_approval_steps, waiting_tool_calls

logger = logging.getLogger(__name__)

# Who records an approval request's lifecycle on the run's audit chain.
LIFECYCLE_ACTOR = Actor.system("approvals")


def lock_run(run_id: int, *, skip_held: bool = False) -> Run | None:
    """Lock run `run_id`'s row for the caller's transaction, before any of its requests:
    the order every transition and a decision lock in (the other order deadlocks with
    them, since recording on the run's chain locks the run). Returns the run (None if there
    is none), carrying the database's clock as it was locked: what a decision and the
    sweep judge a request's due time by, and date what they write about its requests by
    (approvals.timeouts.judged_at).

    `skip_held` (the sweep's parts): None also while another transaction holds the run (a
    person's action under way, a session left idle in a transaction), and the pass leaves
    that run to the next. Waiting there held the whole pass, and with it every other run's
    requests, reminders, timeouts, decisions and notifications, for as long as the other
    session kept the row; later passes found the pass's lock taken and did nothing."""
    return store.current().lock_run(run_id, skip_held=skip_held)


def record_lifecycle(approval: ApprovalRequest, action: str, now: datetime, *,
                     reason: str = "", actor: Actor | None = None, **data) -> None:
    """In the caller's transaction: append what happened to `approval` (opened, reminded,
    escalated, superseded, withdrawn) to its run's hash-chained audit log, so the run's
    history holds its approvals' lifecycle, not only the request row. The approvals system
    records it, unless a person's own act is what happened (`actor`). Its "problem" is
    kept without addresses: the run's history is shown to whoever may view the run."""
    if data.get("problem"):
        data["problem"] = without_addresses(data["problem"])
    transitions.record_approval_event(
        approval.run_id, action=action, step_name=approval.step_name,
        actor=actor or LIFECYCLE_ACTOR,
        reason=reason, now=now,
        data={"approval_request": approval.pk, "kind": approval.kind,
              **({"operator_action": approval.action} if approval.action else {}),
              **({"tool_call": approval.params.get("tool_call"),
                  "args_hash": approval.params.get("args_hash")}
                 if approval.kind == RequestKind.TOOL_CALL else {}), **data})


def next_reminder(start: datetime, every: timedelta | None, due: datetime) -> datetime | None:
    """When to remind next: `every` after `start`, if that comes before `due`."""
    if not every:
        return None
    at = start + every
    return at if at < due else None


def open_pending_requests(*, now: datetime | None = None, limit: int = 200,
                          after: int | None = None) -> int:
    """Open a request for every approval step a run waits on, and every tool call, that has
    none (of the waits past id `after`: the sweep's position, approvals.sweep_scope).
    Returns how many were opened. One whose request cannot be made (its snapshot fails, the
    release removed its tool or its approvers) holds its run for a person; any other
    failure is tried again at the next sweep until it has lasted (approvals.open_failures).
    Neither stops the others."""
    # Nearly every pass finds every wait asked for already. One look for a wait without a
    # request (ids only) costs a fraction of the two queries that load the waits with their
    # runs, steps and calls, whose building is most of an idle sweep's time.
    if not unasked_waits(after).exists():
        return 0
    opened = 0
    for wait in waiting_approval_steps(limit, after):
        try:
            if open_request(wait.run, wait.step_name, now=now) is not None:
                opened += 1
                if wait.open_failures:
                    open_failures.cleared(run_id=wait.run_id, step_name=wait.step_name,
                                          tool_call_id=None)
        except SnapshotUnavailable as exc:
            if connection_lost(exc):
                return stop_on_lost_connection(exc, opened)
            hold_unaskable(wait.run_id, wait.step_name, str(exc), cause=exc.__cause__)
        except Exception as exc:
            if connection_lost(exc):
                return stop_on_lost_connection(exc, opened)
            _failed(exc, now, wait.run_id, wait.step_name)
    for call in waiting_tool_calls(limit, after):
        try:
            if open_tool_call_request(call, now=now) is not None:
                opened += 1
                open_failures.cleared(run_id=call.step.run_id, step_name=call.step.name,
                                      tool_call_id=call.pk)
        except SnapshotUnavailable as exc:
            if connection_lost(exc):
                return stop_on_lost_connection(exc, opened)
            hold_unaskable(call.step.run_id, call.step.name, str(exc), tool_call=call.ref,
                            cause=exc.__cause__)
        except Exception as exc:
            if connection_lost(exc):
                return stop_on_lost_connection(exc, opened)
            _failed(exc, now, call.step.run_id, call.step.name, call=call)
    return opened


def _failed(exc: Exception, now: datetime | None, run_id: int, step_name: str, *,
            call: ToolCall | None = None) -> None:
    """Opening a wait's request failed for a reason nobody can tell from a passing one:
    counted, tried again next pass, and its run held for a person once it has lasted
    (approvals.open_failures)."""
    failing = open_failures.count_failure(run_id=run_id, step_name=step_name, now=now,
                                          tool_call_id=call.pk if call else None)
    what = f"run {run_id} step {step_name}" + (f" tool call {call.ref}" if call else "")
    open_failures.log_failure(exc, failing, what)
    if failing is not None and failing.lasted():
        hold_unaskable(run_id, step_name, open_failures.described(exc, failing),
                        tool_call=call.ref if call else None)


def connection_lost(exc: BaseException) -> bool:
    """Whether `exc` is, or was caused by, a failure of the database connection itself
    (a snapshot function's failure wraps the error it met)."""
    return database_failure(exc) is not None


def stop_on_lost_connection(exc: BaseException, opened: int) -> int:
    """The database connection failed during the batch (the server restarted, the session
    was terminated). Every later row would fail on the same dead connection, each with its
    own traceback: close it instead, so that the next query (the rest of this sweep, or the
    next pass) opens a new one, and stop the batch with one line. What was not opened is
    still unasked, and the next pass opens it. Returns how many were opened."""
    connection.close()
    cause = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
    logger.error("approval requests: database connection lost after %d opened (%s: %s); "
                 "batch stopped, the next pass opens the rest", opened, type(exc).__name__,
                 cause)
    return opened


def hold_unaskable(run_id: int, step_name: str, why: str, *, tool_call: str | None = None,
                   cause: BaseException | None = None, actor: Actor | None = None) -> bool:
    """No request can be made for this wait, an approval step's or a tool call's, or the
    one made cannot be checked any more (approvals.unreadable): nobody could decide it, so
    a person looks. `cause`: what the snapshot met, classified as the executor classifies
    what a step's code raises, so the run is held for the reason naming its cure (a sealed
    value: the key). `actor`: who found it (the system's by default). Whether it was held."""
    what = f"step {step_name}" + (f" tool call {tool_call}" if tool_call else "")
    try:
        transitions.approval_unaskable(run_id, step_name=step_name, tool_call=tool_call,
                                       actor=actor or LIFECYCLE_ACTOR, why=why,
                                       error=classify(cause) if cause is not None else None)
    except TransitionNotAllowed as exc:
        # It moved on meanwhile (decided, cancelled), or the wait names nothing that waits
        # (the sweep reports those, approvals.sweep_scope): nothing to hold.
        logger.info("approval request for run %s %s cannot be made (%s); not held: %s",
                    run_id, what, why, exc)
        return False
    logger.warning("approval request for run %s %s cannot be made: %s; the run waits for a "
                   "person", run_id, what, why)
    return True


def open_request(run: Run, step_name: str, *,
                 now: datetime | None = None) -> ApprovalRequest | None:
    """Open the request for `step_name` of `run`: the request, the approvers' permissions
    and the notifications in one transaction (a crash before commit leaves none of them).
    None if the step no longer waits or another process opened it first."""
    snapshot, digest = compute_snapshot(run, step_name)
    spec = registered_workflow(run).step(step_name)
    # A step with the stop verdict waits before each attempt; it may name no approvers.
    gated = spec.kind != definition.APPROVAL
    policy = stop_gate_policy(spec) if gated else spec.approval
    # Four eyes: the operator who sent this attempt again does not approve it.
    requester = step_requester(run.pk, step_name) if gated else None
    try:
        with transaction.atomic(durable=True):
            # Dated by the database's clock as the run is locked (runs.store.time_of_lock),
            # the clock its timeout is judged by (timeouts.judged_at): not this process's
            # estimate of it, which is off for a while after its host's clock stepped.
            if (locked := lock_run(run.pk, skip_held=True)) is None:
                return None  # held by another transaction: the next pass opens it
            now = store.time_of_lock(locked, given=now)
            waiting = Step.objects.filter(run_id=run.pk, name=step_name,
                                          status=StepStatus.WAITING,
                                          run__status=RunStatus.WAITING).exists()
            if not waiting:
                return None
            return _step_request(run=run, step_name=step_name, snapshot=snapshot,
                                 digest=digest, policy=policy, now=now,
                                 requested_by_id=requester)
    except IntegrityError:
        # The one-open-request constraint: another sweep opened it first.
        logger.info("approval request for run %s step %s already open", run.pk, step_name)
        return None


def tool_call_snapshot(call: ToolCall, tool: definition.ToolSpec) -> tuple[dict, str]:
    """What a person approves of a tool call: the tool, where it acts, and its arguments as
    people see them (declared fields and anything like a credential masked), with the hash
    of the full arguments that the decision is bound to. The snapshot's own hash (the
    link's) changes with the arguments, since it holds their hash. SnapshotUnavailable,
    caused by the sealed value, if the arguments cannot be opened: as for an approval
    step's snapshot that cannot open one, the sweep holds the run for the key
    (hold_unaskable) and nobody is asked or mailed about a call that, approved, could never
    be made."""
    if (unopened := unopened_arguments(call.ref, call.arguments)) is not None:
        raise unopened
    verdict = effect_verdict(tool)
    earlier = earlier_call_may_land(call) if tool.has_side_effect else None
    # Why the runtime asks a person (the tool's own approval needs no reason): the stop
    # verdict, a call of the tool that may land beside this one, or both.
    why = "; ".join(([verdict.reason] if verdict is not None else [])
                    + ([repeat_warning(earlier)] if earlier is not None else []))
    snapshot = normalise({
        "tool": call.tool, "tool_call": call.ref, "agent_step": call.step.name,
        "system": tool.system or "-", "impact": tool.impact,
        "description": tool.description or f"{tool.kind} tool",
        "arguments": sensitive.shown(tool, call.arguments),
        "arguments_sha256": call.args_hash,
        # The stop verdict: each attempt is approved, and the person is told why.
        **({"attempt": call.attempt + 1, "verdict": verdict.decision}
           if verdict is not None else {}),
        **({"may_land_beside": earlier.ref} if earlier is not None else {}),
        **({"why_a_person_approves": why} if why else {}),
    })
    return snapshot, snapshot_hash(snapshot)


def open_tool_call_request(call: ToolCall, *,
                           now: datetime | None = None) -> ApprovalRequest | None:
    """Open the request for tool call `call`, which waits for a person: the request, its
    approvers' permissions and notifications in one transaction. A request still pending
    for another call of the same agent step (the model proposed changed arguments since)
    is superseded by it: its link says so, and it can never be approved. None if the call
    no longer waits or another process opened its request first."""
    run, step = call.step.run, call.step
    tool = registered_workflow(run).step(step.name).tools.get(call.tool)
    if tool is None:
        raise SnapshotUnavailable(f"{step.name} declares no tool {call.tool!r}")
    snapshot, digest = tool_call_snapshot(call, tool)
    policy = tool.approval_policy
    if policy is None and ("verdict" in snapshot or "may_land_beside" in snapshot):
        # Asked by the runtime, not by the tool: the agent's stop-verdict approvers.
        policy = stop_gate_policy(tool.agent)
    if policy is None:
        raise SnapshotUnavailable(f"tool {call.tool!r} declares no approvers")
    fields = {"kind": RequestKind.TOOL_CALL, "run": run, "step_name": step.name,
              "tool_call": call, "snapshot": snapshot, "snapshot_hash": digest,
              "params": {"tool_call": call.ref, "tool": call.tool,
                         "args_hash": call.args_hash},
              # Four eyes: the operator who sent this call again may not approve it.
              "requested_by_id": tool_call_requester(call)}
    try:
        with transaction.atomic(durable=True):
            # The run locked before the request it may supersede, and its time read with
            # the lock dates the request, as open_request's.
            if (locked := lock_run(run.pk, skip_held=True)) is None:
                return None  # held by another transaction: the next pass opens it
            now = store.time_of_lock(locked, given=now)
            waiting = ToolCall.objects.filter(
                pk=call.pk, status=ToolCallStatus.WAITING, args_hash=call.args_hash,
                step__status=StepStatus.WAITING, step__run__status=RunStatus.WAITING).exists()
            if not waiting:
                return None
            stale = (ApprovalRequest.objects.select_for_update(of=("self",))
                     .select_related("run")
                     .filter(run=run, kind=RequestKind.TOOL_CALL, step_name=step.name,
                             status=RequestStatus.PENDING).exclude(tool_call=call)
                     # A cancelled call's request is withdrawn, with that reason
                     # (approvals.withdrawal), never superseded.
                     .exclude(tool_call__status=ToolCallStatus.CANCELLED).first())
            if stale is not None:
                return _supersede(stale, digest, now, lambda: _policy_request(
                    policy=policy, now=now, **fields),
                    why=f"the model proposed call {call.ref} of {call.tool} (arguments "
                        f"sha256 {call.args_hash}) in place of call "
                        f"{stale.params.get('tool_call')}")
            return _policy_request(policy=policy, now=now, **fields)
    except IntegrityError:
        logger.info("approval request for run %s tool call %s already open", run.pk, call.ref)
        return None


def create_request(*, now: datetime, approvers: list[str], remind_every: timedelta | None,
                   timeout: timedelta, opened_by_requester: bool = True,
                   **fields) -> ApprovalRequest:
    """In the caller's transaction: a pending request asked at `now` and due `timeout`
    later, its `approvers` granted the decide permission and notified. `fields` are the
    rest of the request (its kind, run, subject, snapshot and timeout policy). What stood in
    the way of asking someone (an unknown group, say) is recorded on the request."""
    due = now + timeout
    approval = ApprovalRequest.objects.create(
        approvers=approvers, remind_every=remind_every, timeout=timeout, requested_at=now,
        due_at=due, next_reminder_at=next_reminder(now, remind_every, due), **fields)
    _record_problems(approval, grant_and_notify(approval, approvers,
                                                NotificationKind.REQUEST, now))
    # An operator who asks for a second person acted: the run's history names them and
    # their reason, as it would had the action needed nobody else.
    asked = (approval.kind == RequestKind.OPERATOR_ACTION and approval.requested_by_id
             and opened_by_requester)
    record_lifecycle(approval, AuditAction.APPROVAL_OPENED, now,
                     actor=Actor.for_user(approval.requested_by) if asked else None,
                     reason=approval.snapshot.get("reason", "") if asked else "",
                     approvers=list(approvers), due_at=due.isoformat(),
                     payload_hash=approval.snapshot_hash, problem=approval.problem)
    return approval


def _policy_request(*, policy: definition.ApprovalPolicy, now: datetime,
                    **fields) -> ApprovalRequest:
    """create_request with who is asked and the schedule taken from `policy`."""
    return create_request(
        approvers=list(policy.approvers), escalate_to=list(policy.escalate_to),
        remind_every=policy.remind_every, timeout=policy.timeout,
        on_timeout=policy.on_timeout, now=now, **fields)


def _step_request(*, run: Run, step_name: str, snapshot: dict, digest: str,
                  policy: definition.ApprovalPolicy, now: datetime,
                  requested_by_id: int | None) -> ApprovalRequest:
    return _policy_request(kind=RequestKind.STEP, run=run, step_name=step_name,
                           snapshot=snapshot, snapshot_hash=digest, policy=policy, now=now,
                           requested_by_id=requested_by_id)


def _record_problems(approval: ApprovalRequest, problems: list[str]) -> None:
    if problems:
        approval.problem = request_problem(approval, problems)
        ApprovalRequest.objects.filter(pk=approval.pk).update(problem=approval.problem)
        logger.warning("approval request %s: %s", approval.pk, approval.problem)


def supersede(approval: ApprovalRequest, snapshot: dict, digest: str,
              now: datetime) -> ApprovalRequest:
    """In the caller's transaction, with `approval` locked: the payload changed, so this
    request can never be approved; a new one asks about the new payload."""
    policy = definition.ApprovalPolicy(
        approvers=tuple(approval.approvers), remind_every=approval.remind_every,
        timeout=approval.timeout, on_timeout=approval.on_timeout,
        escalate_to=tuple(approval.escalate_to))
    if approval.kind == RequestKind.OPERATOR_ACTION:
        # The same person's request about the run as it is now: they asked once, so the
        # new request's opening names nobody (requested_by stays theirs for four eyes).
        return _supersede(approval, digest, now, lambda: _policy_request(
            kind=RequestKind.OPERATOR_ACTION, run=approval.run, action=approval.action,
            params=approval.params, requested_by_id=approval.requested_by_id,
            snapshot=snapshot, snapshot_hash=digest, policy=policy, now=now,
            opened_by_requester=False),
            why=f"what may have happened changed while pending: "
                f"{', '.join(snapshot['high_impact_effects']) or 'no effect stands now'}")
    return _supersede(approval, digest, now, lambda: _step_request(
        run=approval.run, step_name=approval.step_name, snapshot=snapshot, digest=digest,
        policy=policy, now=now, requested_by_id=approval.requested_by_id))


def _supersede(approval: ApprovalRequest, digest: str, now: datetime, make_new, *,
               why: str = "") -> ApprovalRequest:
    """Mark `approval` (locked) superseded, then make its successor with `make_new()`."""
    approval.status = RequestStatus.SUPERSEDED
    approval.settled_at = now  # first: it frees the one-open-request constraint
    approval.next_reminder_at = None
    approval.comment = why or (f"payload changed while pending: sha256 "
                               f"{approval.snapshot_hash} became {digest}")
    approval.save(update_fields=["status", "settled_at", "next_reminder_at", "comment"])
    record_lifecycle(approval, AuditAction.APPROVAL_SUPERSEDED, now, reason=approval.comment,
                     payload_hash=digest)
    new = make_new()
    approval.superseded_by = new
    approval.save(update_fields=["superseded_by"])
    # A bulk job names the request that decides its waiting runs: the successor from the
    # commit that closes this one, or its progress would point at a request nobody may
    # decide.
    BulkJob.objects.filter(approval=approval).update(approval=new)
    logger.info("approval request %s superseded by %s: %s", approval.pk, new.pk,
                approval.comment)
    return new


def current_snapshot(approval: ApprovalRequest) -> tuple[dict, str] | SnapshotUnavailable:
    """The step's snapshot as it would be now (computed outside any transaction), to be
    compared with `approval`'s (a rotated SECRET_KEY aside: snapshots.masked_snapshot), or
    why it cannot be computed."""
    try:
        return compute_snapshot(approval.run, approval.step_name,
                                hashed_as=approval.snapshot_hash)
    except SnapshotUnavailable as exc:
        return exc
