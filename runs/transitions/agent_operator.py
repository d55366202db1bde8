"""The operator actions on one tool call of an agent step: send a failed call again with its
own key, and undo one call whose effect stands. (Settling an unknown call is
agent_calls.reconcile_tool_call.)

Each is an operator transition like the others (runs.transitions.operator): a reason, the run
locked and its move checked against RUN_TRANSITIONS, the call checked under the lock, the
change and its audit record saved together. Undoing a call reaches another system, so it is
two transitions with the call in between (runs.tool_call_undo): the intent, which counts the
attempt and marks the call compensating, and the outcome, recorded whatever the run did
meanwhile. A crash between them leaves the call compensating; asking again sends the undo
again with the same compensation key.
"""

from datetime import datetime

from django.db import transaction

from audit.actions import AuditAction
from audit.chain import Actor

from .. import sensitive
from ..agent_models import ToolCall, ToolCallStatus
from ..models import ErrorClass, Run, StepStatus
from .agent_calls import _call_data, _save, checked_call
from .kernel import Q, _Change, _lock, _now, _reset_budget, _snapshot
from .operator_rules import _operator_transition
from .tool_call_rules import tool_of

S = ToolCallStatus


def retry_tool_call(run_id: int, *, step_name: str, call_ref: str, actor: Actor,
                    reason: str, now: datetime | None = None) -> Run:
    """Send one failed tool call again with the same idempotency key: the call and its step
    pending, the run queued; the worker sends it (after a person's approval of its
    arguments where its tool asks for one). Refused
    once the model has answered after the failure (it was told the call failed). The call's
    elapsed-time budget starts again; its attempts go on counting, so a call past its
    attempt budget gets this one send.

    An approval of the call's arguments is spent by the send it authorised: a call whose
    tool asks for approval of these arguments waits for a person again before it is
    resent, and the operator who retried it is that approval request's requester, who may
    not decide it (four eyes, approvals.permissions)."""
    with _operator_transition(run_id, "retry_tool_call", actor=actor, reason=reason, now=now,
                              step_name=step_name) as op:
        run, change = op.run, op.change
        step, call = checked_call(op, "retry_tool_call", step_name, call_ref)
        before = _snapshot(run, step)
        tool = tool_of(op.definition, step, call)
        approval_spent = bool(call.approved_hash) and tool is not None and \
            tool.needs_approval(tool.args.model_validate(sensitive.opened(call.arguments)))
        if approval_spent:
            call.approved_hash, call.approved_by = "", ""
        call.status, call.finished_at = S.PENDING, None
        call.started_at, call.next_attempt_at = None, None
        call.lookup_failures = 0
        _save(call, change.now)
        step.status = StepStatus.PENDING
        _reset_budget(step)
        change.step_changed(step)
        run.next_wake_at = None
        change.move(Q)
        change.audit(AuditAction.STEP_RETRIED, step=step, reason=reason, before=before,
                     after=_snapshot(run, step),
                     data=_call_data(call, key=call.idempotency_key, attempt=call.attempt,
                                     last_error=call.error_message,
                                     **({"approval_spent": True} if approval_spent else {})))
    return run


def begin_tool_call_undo(run_id: int, *, step_name: str, call_ref: str, actor: Actor,
                         reason: str, now: datetime | None = None) -> ToolCall:
    """The intent of undoing one tool call: the call compensating, its undo attempt counted,
    the key in the audit record. The run stays in attention. Returns the call."""
    with _operator_transition(run_id, "compensate_tool_call", actor=actor, reason=reason,
                              now=now, step_name=step_name) as op:
        change = op.change
        step, call = checked_call(op, "compensate_tool_call", step_name, call_ref)
        before = call.status
        call.status = S.COMPENSATING
        call.compensation_attempt += 1
        _save(call, change.now)
        change.step_changed(step)
        change.audit(AuditAction.TOOL_CALL_COMPENSATION_INTENT, step=step, reason=reason,
                     before={"call_status": before}, after={"call_status": call.status},
                     data=_call_data(call, key=call.compensation_key,
                                     attempt=call.compensation_attempt, operator=True))
    return call


def record_tool_call_undo(run_id: int, *, call_id: int, attempt: int, actor: Actor,
                          remote_ref: str = "", error: str = "", error_class: str = "",
                          now: datetime | None = None) -> ToolCall:
    """The outcome of an operator's undo of one tool call (`error` empty: it succeeded).
    Evidence: recorded whatever state the run is in now, and moving no run state; a call
    whose undo was asked for again meanwhile (another attempt) keeps the newer one's."""
    with transaction.atomic(durable=True):
        call = ToolCall.objects.select_related("step").get(pk=call_id)
        run = _lock(call.step.run_id)
        change = _Change(run, None, actor, _now(now))
        call = ToolCall.objects.select_related("step").get(pk=call_id)
        step = call.step
        if call.status != S.COMPENSATING or call.compensation_attempt != attempt:
            change.audit(AuditAction.LATE_RESULT, step=step, data=_call_data(
                call, undo_attempt=attempt, remote_ref=remote_ref, error=error,
                now_status=call.status))
        elif not error:
            call.status = S.COMPENSATED
            call.compensation_ref = str(remote_ref or "")[:300]
            _save(call, change.now)
            change.audit(AuditAction.TOOL_CALL_COMPENSATED, step=step,
                         before={"call_status": S.COMPENSATING},
                         after={"call_status": call.status,
                                "compensation_ref": call.compensation_ref},
                         data=_call_data(call, operator=True))
        else:
            call.status = S.COMPENSATION_FAILED
            call.error_class = error_class or ErrorClass.UNCLASSIFIED
            call.error_message = error[:2000]
            _save(call, change.now)
            change.audit(AuditAction.COMPENSATION_FAILED, step=step,
                         before={"call_status": S.COMPENSATING},
                         after={"call_status": call.status},
                         data=_call_data(call, error=error, operator=True))
        change.save()
    return call
