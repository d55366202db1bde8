"""The transitions of an agent step: a model turn stored, and each tool call it asks for
checkpointed before and after it runs, settled by key when its outcome is unknown, held
for a person's approval of its arguments, and undone in the run's compensation.

Each function is one transition of the run, as in the rest of this package: in one durable
transaction, the run locked and checked against RUN_TRANSITIONS under the lease's fencing
token, the turn or call rows written with the audit records. The step's own life (its
intent at each claim, its success once the model answers without tool calls) goes through
the lease cycle like any step's.
"""

import hashlib
import json
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction

from audit.actions import AuditAction
from audit.chain import Actor
from audit.models import AuditRecord

from .. import definition as d
from .. import sensitive
from ..agent_models import AgentTurn, ToolCall, ToolCallStatus
from ..contracts import effect_verdict
from ..errors import TransitionNotAllowed
from ..models import AttentionReason, ErrorClass, Run, Step, StepStatus
from ..redaction import REDACTED, redact
from .attempts import intent_of_call
from .kernel import (  # the package's shared vocabulary
    _MAX_HINT_COUNTDOWN,
    A,
    Lease,
    Outcome,
    W,
    _Change,
    _extend_lease,
    _fenced,
    _halt,
    _lock,
    _now,
    _snapshot,
    _terminate_in,
    release_calls_in_flight,
)
from .tool_call_rules import call_refusal, last_turn, tool_of

S = ToolCallStatus
# A call in one of these states is settled: the model can be told how it went.
SETTLED = frozenset({S.SUCCEEDED, S.FAILED, S.INVALID, S.DECLINED, S.CANCELLED, S.COMPENSATING,
                     S.COMPENSATED, S.COMPENSATION_FAILED})


@dataclass(frozen=True)
class ModelTurn:
    """What the model answered, as the executor read it from the completion."""

    content: str
    tool_calls: list[dict]  # [{"id", "name", "arguments": raw JSON text}]
    finish_reason: str = ""
    model_ref: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # A summary of the turns before this index (runs.agent_history); 0: an ordinary turn.
    summarises: int = 0


def args_hash(arguments) -> str:
    """The hash a person's approval of a tool call is bound to."""
    return hashlib.sha256(json.dumps(arguments, sort_keys=True, separators=(",", ":"),
                                     default=str).encode()).hexdigest()


def shown_arguments(tool: d.ToolSpec | None, arguments):
    """A call's arguments as people and audit records see them: the tool's declared fields
    and anything that looks like a credential masked."""
    if isinstance(arguments, dict) and tool is not None:
        arguments = {k: (REDACTED if k in tool.redact else v) for k, v in arguments.items()}
    elif tool is not None and tool.redact and arguments is not None:
        # Text the model sent that is not an object (kept as evidence of invalid
        # arguments): a declared field may be anywhere in it.
        return REDACTED
    return redact(arguments)


def calls_of(step: Step) -> list[ToolCall]:
    return list(ToolCall.objects.filter(step=step).order_by("turn", "index"))


def turns_of(step: Step) -> list[AgentTurn]:
    return list(AgentTurn.objects.filter(step=step).order_by("index"))


def _spec(lease: Lease, step: Step) -> d.AgentSpec:
    return lease.definition.step(step.name)


def _call_data(call: ToolCall, **more) -> dict:
    return {"tool_call": call.ref, "tool": call.tool, **more}


@contextmanager
def _holding(lease: Lease, action: str, now: datetime | None = None, *,
             cancel_before: str = "", cancel_after: str = ""):
    """The skeleton of the lease holder's agent transitions: the run locked, still under
    the lease's token, the move checked; the body's changes saved together. Yields None,
    writing nothing, if the lease was taken over (the executor then stops).

    A cancel request is read here, under the run's lock: `cancel_before` names the work
    about to start (none starts: yields None), `cancel_after` the work just settled (the
    body's changes are kept, then the run stops)."""
    now = _now(now)
    with transaction.atomic(durable=True):
        run = _lock(lease.run.pk)
        if _fenced(run, lease):
            lease.finished, lease.work = True, None
            yield None
            return
        change = _Change(run, action, Actor.system(lease.worker), now)
        _extend_lease(run, now)
        lease.run = run
        if cancel_before and run.cancel_requested:
            _cancel_inside(change, lease, cancel_before)
            change.save()
            yield None
            return
        yield change
        if cancel_after and run.cancel_requested and not lease.finished:
            _cancel_inside(change, lease, cancel_after)
        change.save()


def _cancel_inside(change: _Change, lease: Lease, where: str) -> None:
    """A cancel request takes effect inside the agent step: nothing new starts, the calls
    made so far and the conversation are kept, and the record says where it took effect."""
    step = lease.work
    if step is not None and step.status == StepStatus.RUNNING:
        step.status = StepStatus.FAILED
        step.error_class = ""
        step.error_message = f"cancelled by a person {where}"
        step.lease_owner, step.lease_expires_at = "", None
        change.step_changed(step)
    _terminate_in(change, lease.steps, reason=f"cancel took effect {where}",
                  action=AuditAction.CANCELLED,
                  data={"step": step.name if step else "", "where": where})
    lease.finished, lease.work = True, None


# --- a tool call ---------------------------------------------------------------------------

def _fresh(call: ToolCall) -> ToolCall:
    """The call as committed (the run's lock is held: nobody else changes it meanwhile)."""
    return ToolCall.objects.get(pk=call.pk)


def _save(call: ToolCall, now: datetime) -> None:
    call.updated_at = now
    call.save()


def begin_tool_call(lease: Lease, step: Step, call: ToolCall, *,
                    now: datetime | None = None) -> ToolCall | None:
    """The intent checkpoint: the call running, its attempt counted and started, in its
    row (the record of its outcome carries them). Returns the call as recorded, or None if
    the lease was lost."""
    tool = _spec(lease, step).tools[call.tool]
    where = f"before tool call {call.ref} ({call.tool})"
    with _holding(lease, "tool_call", now, cancel_before=where) as change:
        if change is None:
            return None
        call = _fresh(call)
        call.status = S.RUNNING
        call.attempt += 1
        if effect_verdict(tool) is not None:
            # The stop verdict: an approval allows one attempt; a retry asks again.
            call.approved_hash = ""
        call.started_at = call.started_at or change.now
        call.attempt_started_at = change.now
        call.next_attempt_at = None
        _save(call, change.now)  # the intent checkpoint; its outcome's record carries it
        change.step_changed(step)  # the step's updated_at: progress within the step
    return call


def record_tool_outcome(lease: Lease, step: Step, call: ToolCall, outcome: Outcome, *,
                        now: datetime | None = None) -> Lease:
    """The outcome checkpoint of one tool call, classified as a step's would be:
    succeeded; transient (sent again with the tool's backoff, within its budget); unknown
    (settled by key before anything else runs); permanent or unclassified (a person)."""
    spec = _spec(lease, step)
    tool = spec.tools[call.tool]
    where = f"after tool call {call.ref} ({call.tool}) settled"
    with _holding(lease, "tool_call", now, cancel_after=where) as change:
        if change is None:
            _late_tool_result(lease, step, call, outcome)
            return lease
        call = _fresh(call)
        before = _snapshot(change.run, step)
        now = change.now
        if outcome.succeeded:
            _call_succeeded(change, step, call, outcome.value, outcome.remote_ref,
                            AuditAction.TOOL_CALL_SUCCEEDED)
            return lease
        error = outcome.error
        call.error_class, call.error_message = error.error_class, error.message
        cls = error.error_class
        if cls == ErrorClass.UNKNOWN and not tool.has_side_effect:
            cls = ErrorClass.TRANSIENT  # a read has nothing to duplicate
        if cls == ErrorClass.TRANSIENT:
            _resend_or_stop(change, lease, step, call, tool, before, why="transient error",
                            error=error.message, retry_after=error.retry_after)
        elif cls == ErrorClass.UNKNOWN:
            call.status = S.UNKNOWN
            _save(call, now)
            change.step_changed(step)
            change.audit(AuditAction.OUTCOME_UNKNOWN, step=step,
                         data=_call_data(call, **intent_of_call(call), error=error.message))
        elif cls == ErrorClass.PERMANENT:
            call.status, call.finished_at = S.FAILED, now
            _save(call, now)
            _stop_step(change, lease, step, before, StepStatus.FAILED,
                       AttentionReason.PERMANENT_ERROR,
                       f"tool {call.tool} (call {call.ref}): {error.message}", error.message)
        else:
            call.status = S.UNKNOWN if tool.has_side_effect else S.FAILED
            call.error_class = ErrorClass.UNCLASSIFIED
            _save(call, now)
            _stop_step(change, lease, step, before,
                       StepStatus.UNKNOWN if tool.has_side_effect else StepStatus.FAILED,
                       AttentionReason.UNCLASSIFIED_ERROR,
                       f"tool {call.tool} (call {call.ref}): {error.message}", error.message)
    return lease


def _call_succeeded(change: _Change, step: Step, call: ToolCall, value, remote_ref: str,
                    action: str, **data) -> None:
    before = call.status
    call.status = S.SUCCEEDED
    call.result = sensitive.seal_result(redact(value), tool_of(
        d.registry.get(change.run.workflow_name, change.run.workflow_version), step, call))
    call.remote_ref = str(remote_ref or "")[:300]
    call.error_class, call.error_message = "", ""
    call.lookup_failures = 0
    call.finished_at = change.now
    _save(call, change.now)
    change.step_changed(step)
    if before == S.RUNNING:
        data = {**intent_of_call(call), **data}
    change.audit(action, step=step, before={"call_status": before},
                 after={"call_status": call.status, "remote_ref": call.remote_ref},
                 data=_call_data(call, **data))


def _stop_step(change: _Change, lease: Lease, step: Step, before: dict, step_status: str,
               reason: str, message: str, error: str) -> None:
    step.status = step_status
    step.error_message = message
    step.error_class = ErrorClass.UNKNOWN if step_status == StepStatus.UNKNOWN else \
        ErrorClass.PERMANENT if reason == AttentionReason.PERMANENT_ERROR else \
        ErrorClass.EXHAUSTED if reason == AttentionReason.BUDGET_EXHAUSTED else \
        ErrorClass.UNCLASSIFIED
    step.lease_owner, step.lease_expires_at = "", None
    change.step_changed(step)
    _halt(change, lease, step, before, A, reason, f"{step.name}: {message}", error)


def _release_until(change: _Change, lease: Lease, step: Step, at: datetime) -> None:
    """Release the run until `at`, when the sweeper (or a wake-up hint) brings it back."""
    run = change.run
    step.status = StepStatus.SCHEDULED
    step.next_attempt_at = at
    step.lease_owner, step.lease_expires_at = "", None
    change.step_changed(step)
    change.move(W, message=f"{step.name}: a tool call is due again at {at:%H:%M:%S}")
    run.next_wake_at = at
    wait = (at - change.now).total_seconds()
    if wait <= _MAX_HINT_COUNTDOWN:
        change.wake_countdown = max(wait, 0.0)
    lease.finished, lease.work = True, None


def _resend_or_stop(change: _Change, lease: Lease, step: Step, call: ToolCall,
                    tool: d.ToolSpec, before: dict, *, why: str, error: str,
                    retry_after: float | None = None, data: dict | None = None) -> None:
    """Send the call again with the same key after the tool's backoff, if its budget
    (attempts and elapsed time, the tool's RetryPolicy) allows; else stop for a person.
    The tool call's counterpart of resends.schedule_resend: the same policy arithmetic,
    counted on the call rather than the step."""
    policy, now = tool.retry, change.now
    elapsed = (now - call.started_at).total_seconds() if call.started_at else 0
    delay = policy.delay(call.attempt, retry_after=retry_after)
    if not policy.allows_another(attempts_made=call.attempt, elapsed=elapsed,
                                 next_delay=delay):
        call.status, call.error_class, call.finished_at = S.FAILED, ErrorClass.EXHAUSTED, now
        _save(call, now)
        spent = (f"retry budget spent after {call.attempt} attempt"
                 f"{'s' if call.attempt != 1 else ''} ({why}); last error: {error}")
        _stop_step(change, lease, step, before, StepStatus.FAILED,
                   AttentionReason.BUDGET_EXHAUSTED,
                   f"tool {call.tool} (call {call.ref}): {spent}", error)
        return
    call.status = S.SCHEDULED
    call.next_attempt_at = now + timedelta(seconds=delay)
    _save(call, now)
    _release_until(change, lease, step, call.next_attempt_at)
    change.audit(AuditAction.RETRY_SCHEDULED, step=step, before=before,
                 after=_snapshot(change.run, step),
                 data=_call_data(call, **intent_of_call(call), **(data or {}), why=why,
                                 error=error, delay_seconds=round(delay, 3)))


def _late_tool_result(lease: Lease, step: Step, call: ToolCall, outcome: Outcome) -> None:
    """A result that arrived after the lease was taken over: kept as evidence only.

    Called from inside _holding's transaction (which found the lease fenced off), so it
    joins it rather than opening a durable one of its own."""
    with transaction.atomic():
        run = _lock(lease.run.pk)
        change = _Change(run, None, Actor.system(lease.worker), _now(None))
        change.audit(AuditAction.LATE_RESULT, step=step, data=_call_data(
            call, worker=lease.worker, claim=lease.token, current_claim=run.fencing_token,
            succeeded=outcome.succeeded, remote_ref=outcome.remote_ref,
            value=sensitive.seal_result(outcome.value, tool_of(lease.definition, step, call)),
            error=outcome.error.message if outcome.error else ""))
        change.save()


def take_back_calls(lease: Lease, step: Step, running: list[ToolCall], *,
                    now: datetime | None = None) -> Lease:
    """Tool calls a dead worker left running: a write or notify may have acted, so its
    outcome is unknown (settled by key next); a read simply runs again."""
    with _holding(lease, "tool_call", now) as change:
        if change is None:
            return lease
        still_running = [call for call in map(_fresh, running) if call.status == S.RUNNING]
        release_calls_in_flight(
            change, step, calls=still_running, action=AuditAction.STEP_LEASE_EXPIRED,
            why="the worker running it stopped before its outcome was recorded")
        change.step_changed(step)
    return lease


def settle_tool_call(lease: Lease, step: Step, call: ToolCall, verdict, *, error: str = "",
                     now: datetime | None = None) -> Lease:
    """Settle an unknown tool call with what the lookup by its key found, by the rules of
    settle_unknown: Found settles it whatever its impact (the key is the evidence); a failed
    lookup is asked again within the tool's lookup budget; not found (or no lookup, to a
    receiver that honours keys) sends a low-impact call again with the same key, counted
    and backed off; anything else, and any high-impact call, waits for a person."""
    tool = _spec(lease, step).tools[call.tool]
    with _holding(lease, "tool_call", now) as change:
        if change is None:
            return lease
        call = _fresh(call)
        before = _snapshot(change.run, step)
        now = change.now
        if isinstance(verdict, d.Found):
            _call_succeeded(change, step, call, verdict.result, verdict.ref,
                            AuditAction.RECONCILED, verdict="found")
        elif isinstance(verdict, d.LookupFailed):
            call.lookup_failures += 1
            if call.lookup_failures < tool.lookup_attempts:
                call.next_attempt_at = now + timedelta(
                    seconds=tool.retry.delay(call.lookup_failures))
                _save(call, now)
                _release_until(change, lease, step, call.next_attempt_at)
                change.audit(AuditAction.LOOKUP_RETRY_SCHEDULED, step=step, before=before,
                             after=_snapshot(change.run, step),
                             data=_call_data(call, verdict="lookup failed",
                                             error=verdict.reason,
                                             lookup_failures=call.lookup_failures))
            else:
                _save(call, now)
                _stop_step(change, lease, step, before, StepStatus.UNKNOWN,
                           AttentionReason.UNKNOWN_OUTCOME,
                           f"tool {call.tool} (call {call.ref}): {call.lookup_failures} "
                           f"lookups by key failed, the last with: {verdict.reason}; the "
                           "outcome is still unknown", verdict.reason)
        elif (tool.impact == d.LOW and isinstance(verdict, d.NotFound)
              and not tool.honours_key and tool.lookup_delay > 0
              and (call.next_attempt_at is None or call.next_attempt_at > now)):
            call.next_attempt_at = call.next_attempt_at or \
                now + timedelta(seconds=tool.lookup_delay)
            _save(call, now)
            _release_until(change, lease, step, call.next_attempt_at)
            change.audit(AuditAction.RECONCILE_SCHEDULED, step=step, before=before,
                         after=_snapshot(change.run, step),
                         data=_call_data(call, verdict="not found yet"))
        elif tool.impact == d.LOW and (isinstance(verdict, d.NotFound)
                                       or (verdict is None and tool.honours_key)):
            call.lookup_failures = 0
            change.audit(AuditAction.RECONCILED, step=step, data=_call_data(
                call, verdict="not found" if verdict is not None else "cannot ask",
                then="send again with the same key"))
            _resend_or_stop(change, lease, step, call, tool, before,
                            why="lookup by key found nothing" if verdict is not None else
                                "no lookup; the receiver deduplicates on the key",
                            error=call.error_message or error)
        else:
            if isinstance(verdict, d.NotFound):
                why = "the lookup by key found no effect, but a high-impact call is sent " \
                      "again only after a person confirms"
            elif verdict is None:
                why = "no reconcile function, and a high-impact call is not resent " \
                      "without a person" if tool.honours_key else \
                      "no reconcile function and the receiver does not honour keys"
            else:
                why = f"reconciliation could not tell: {verdict.reason or error}"
            _save(call, now)
            _stop_step(change, lease, step, before, StepStatus.UNKNOWN,
                       AttentionReason.UNKNOWN_OUTCOME,
                       f"tool {call.tool} (call {call.ref}): {why}", error)
    return lease


# --- a person's approval of a tool call ----------------------------------------------------

def await_tool_approval(lease: Lease, step: Step, call: ToolCall, *,
                        now: datetime | None = None) -> Lease:
    """A high-impact call waits for a person's approval of exactly these arguments (the
    request carries their hash). No worker is held meanwhile."""
    tool = _spec(lease, step).tools[call.tool]
    with _holding(lease, "tool_call", now) as change:
        if change is None:
            return lease
        call = _fresh(call)
        before = _snapshot(change.run, step)
        call.status = S.WAITING
        _save(call, change.now)
        step.status = StepStatus.WAITING
        step.lease_owner, step.lease_expires_at = "", None
        change.step_changed(step)
        change.move(W, message=f"{step.name}: tool {call.tool} (call {call.ref}) waits for "
                               "a person's approval of its arguments")
        change.wait_for_person(step, call)
        change.run.next_wake_at = None
        change.audit(AuditAction.TOOL_CALL_APPROVAL_REQUESTED, step=step, before=before,
                     after=_snapshot(change.run, step),
                     data=_call_data(call, args_hash=call.args_hash,
                                     arguments=shown_arguments(tool, call.arguments)))
        lease.finished, lease.work = True, None
    return lease


def waiting_tool_calls(run: Run) -> list[ToolCall]:
    """The tool calls of `run` that wait for a person's approval."""
    return list(ToolCall.objects.filter(step__run=run, status=S.WAITING)
                .select_related("step").order_by("step__position", "turn", "index"))


def retried_by(call: ToolCall) -> int | None:
    """The user id of the operator who last sent `call` again (retry_tool_call, recorded
    with the call in the run's audit log), or None. Four eyes: that person does not decide
    the approval the resend waits for."""
    return (AuditRecord.objects
            .filter(run_id=call.step.run_id, action=AuditAction.STEP_RETRIED,
                    step_name=call.step.name, data__tool_call=call.ref,
                    actor_user_id__isnull=False)
            .order_by("-seq").values_list("actor_user_id", flat=True).first())


def _call_named(run: Run, step_name: str, call_ref: str) -> tuple[Step, ToolCall]:
    try:
        turn, index = (int(part) for part in str(call_ref).split("."))
        call = ToolCall.objects.select_related("step").get(
            step__run=run, step__name=step_name, turn=turn, index=index)
    except (ValueError, ToolCall.DoesNotExist):
        raise TransitionNotAllowed(f"run {run.pk} has no tool call {call_ref!r} in step "
                                   f"{step_name!r}") from None
    return call.step, call



def checked_call(op, action: str, step_name: str, call_ref: str) -> tuple[Step, ToolCall]:
    """The step (the row operation `op` locked and will save) and its tool call `call_ref`,
    once tool_call_rules.call_refusal allows `action` on it: the one check of every operator
    action aimed at one call, whoever asks."""
    step, call = _call_named(op.run, step_name, call_ref)
    step = op.step
    refused = call_refusal(action, op.run, step, call, tool_of(op.definition, step, call),
                           last_turn=last_turn(step))
    if refused:
        raise TransitionNotAllowed(refused)
    return step, call

def find_call(run: Run, step_name: str, call_ref: str) -> ToolCall:
    """Tool call `call_ref` ("turn.index") of `step_name` in `run`, read without a lock."""
    return _call_named(run, step_name, call_ref)[1]
