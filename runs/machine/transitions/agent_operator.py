"""The operator actions on one tool call of an agent step: send a failed call again with its
own key, undo one call whose effect stands, settle an unknown call with evidence, and a
person's decision on a call waiting for approval of its arguments.

Each is an operator transition like the others (runs.machine.transitions.operator): a reason, the
run locked and its move checked against RUN_TRANSITIONS, the call checked under the lock, the
change and its audit record saved together. Undoing a call reaches another system, so it is
two transitions with the call in between (runs.agents.tool_call_undo): the intent, which counts the
attempt and marks the call compensating, and the outcome, recorded whatever the run did
meanwhile. A crash between them leaves the call compensating; asking again sends the undo
again with the same compensation key.
"""

from datetime import datetime

from audit.actions import AuditAction
from audit.chain import Actor
from audit.redaction import redact_text

from ... import store
from ...agent_models import ToolCall, ToolCallStatus
from ...definitions import definition
from ...models import AttentionReason, Run, StepStatus
from .. import sensitive
from ..errors import SecondPersonRequired, TransitionNotAllowed
from ..rule_answers import call_asks_a_person
from . import effects, late_outcomes
from .agent_calls import call_data, checked_call, retried_by, save_call
from .in_flight import undo_in_doubt_at_end
from .kernel import (
    ATTENTION,
    QUEUED,
    WAITING,
    Change,
    audit_state,
    end_or_hold,
    lock_run,
    require_evidence,
    transition_on,
    transition_time,
    unsettled_effects,
)
from .lookup_verdicts import looked_up_verdict, still_unknown_reason
from .operator import operator_transition
from .operator_rules import decision_refusal
from .tool_call_rules import DECIDE_TOOL_CALL, call_named, call_state_refusal, tool_of

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
    with operator_transition(run_id, "retry_tool_call", actor=actor, reason=reason, now=now,
                             step_name=step_name, call_ref=call_ref) as op:
        run, change = op.run, op.change
        step, call = checked_call(op, "retry_tool_call", step_name, call_ref)
        before = audit_state(run, step)
        tool = tool_of(op.definition, step, call)
        try:
            approval_spent = bool(call.approved_hash) and tool is not None and \
                call_asks_a_person(tool, tool.args.model_validate(sensitive.opened(call.arguments)))
        except sensitive.UnreadableValue as exc:
            # Whether its approval is spent depends on them: sent again now, it would fail
            # again at once (errors.classify).
            raise TransitionNotAllowed(
                f"tool call {call_ref} of {step_name} is not sent again: its arguments cannot "
                f"be opened here ({exc}); put that key back in FIELD_ENCRYPTION_KEYS, then "
                "retry it") from None
        if approval_spent:
            call.approved_hash, call.approved_by = "", ""
        effects.sent_again_by_person(
            change, effects.CallEffect(op, step, call), reason=reason, before=before,
            attempt=call.attempt, last_error=call.error_message,
            **({"approval_spent": True} if approval_spent else {}))
    return run


def cancel_tool_call(run_id: int, *, step_name: str, call_ref: str, actor: Actor,
                     reason: str, now: datetime | None = None) -> Run:
    """Cancel one tool call that has not run (pending, scheduled, or waiting for a person's
    approval of its arguments) without cancelling the run: it never runs, the model is told
    in its next turn that a person cancelled it, and its approval request is withdrawn (the
    approvals sweep). A run that waited only on it goes on; one in attention stays there."""
    with operator_transition(run_id, "cancel_tool_call", actor=actor, reason=reason,
                             now=now, step_name=step_name, call_ref=call_ref) as op:
        run, change = op.run, op.change
        step, call = checked_call(op, "cancel_tool_call", step_name, call_ref)
        before = audit_state(run, step)
        was = call.status
        call.status, call.finished_at = S.CANCELLED, change.now
        call.next_attempt_at = None
        call.error_class, call.error_message = "", redact_text(
            f"cancelled by {actor.label}: {reason}")
        save_call(call, change.now)
        others = ToolCall.objects.filter(
            step=step, generation=step.generation,
            status__in=(S.WAITING, S.SCHEDULED, S.UNKNOWN)).exclude(pk=call.pk)
        # A call waiting for a person holds the run; one waiting out its backoff or its
        # lookup delay holds it until it is due: queued now, it would be sent early.
        others_wait = any(c.status == S.WAITING for c in others)
        due = min((c.next_attempt_at for c in others if c.next_attempt_at is not None),
                  default=None)
        if run.status == WAITING and not others_wait:
            if due is not None:
                step.status, step.next_attempt_at = StepStatus.SCHEDULED, due
                run.next_wake_at = due
            else:
                step.status = StepStatus.PENDING
                step.lease_owner, step.lease_expires_at = "", None
                run.next_wake_at = None
                change.move(QUEUED)
        change.step_changed(step)
        change.audit(AuditAction.TOOL_CALL_CANCELLED, step=step, reason=reason, before=before,
                     after=audit_state(run, step),
                     data=call_data(call, previous_status=was, key=call.idempotency_key))
    return run


def begin_tool_call_undo(run_id: int, *, step_name: str, call_ref: str, actor: Actor,
                         reason: str, now: datetime | None = None) -> ToolCall:
    """The intent of undoing one tool call: the call compensating, its undo attempt counted,
    the key in the audit record. The run stays in attention. Returns the call."""
    with operator_transition(run_id, "compensate_tool_call", actor=actor, reason=reason,
                             now=now, step_name=step_name, call_ref=call_ref) as op:
        change = op.change
        step, call = checked_call(op, "compensate_tool_call", step_name, call_ref)
        effects.CallEffect(op, step, call).undo_begun(
            change, AuditAction.TOOL_CALL_COMPENSATION_INTENT, reason=reason, operator=True)
    return call


def record_tool_call_undo(run_id: int, *, call_id: int, attempt: int, actor: Actor,
                          remote_ref: str = "", error: str = "", error_class: str = "",
                          now: datetime | None = None) -> ToolCall:
    """The outcome of an operator's undo of one tool call (`error` empty: it succeeded).
    Evidence: recorded whatever state the run is in now, and moving no run state; a call
    whose undo was asked for again meanwhile (another attempt) keeps the newer one's."""
    with store.current().transaction():
        call = ToolCall.objects.select_related("step").get(pk=call_id)
        run = lock_run(call.step.run_id)
        change = Change(run, None, actor, transition_time(now))
        call = ToolCall.objects.select_related("step").get(pk=call_id)
        step = call.step
        if call.compensation_attempt == attempt and not error \
                and undo_in_doubt_at_end(call):
            # The run was ended while this undo was sent: the answer settles it, as a
            # worker's late undo does (late_outcomes.late_result).
            late_outcomes.undo_settled(change, effects.CallEffect(None, step, call),
                                       remote_ref, AuditAction.LATE_RESULT_RECORDED,
                                       operator=True)
        elif call.status != S.COMPENSATING or call.compensation_attempt != attempt:
            change.audit(AuditAction.LATE_RESULT, step=step, data=call_data(
                call, undo_attempt=attempt, remote_ref=remote_ref, error=error,
                now_status=call.status))
        elif not error:
            # No spec is needed to record what the undo did: no definition is read.
            effects.CallEffect(None, step, call).undone(
                change, remote_ref, AuditAction.TOOL_CALL_COMPENSATED, operator=True)
        else:
            effects.CallEffect(None, step, call).undo_failed(
                change, error, error_class, AuditAction.COMPENSATION_FAILED, operator=True)
        change.save()
    return call


def decide_tool_call(run_id: int, *, step_name: str, call_ref: str, args_hash: str,
                     approved: bool, actor: Actor, comment: str = "",
                     data: dict | None = None, now: datetime | None = None,
                     call_id: int | None = None) -> Run:
    """Record a person's decision on a tool call waiting for approval. The decision is
    bound to the hash of the arguments the person saw: it is refused if the call no longer
    waits (decided, or superseded by a later call) or its arguments hash differently.
    Approved: the call runs. Declined: it never runs, and the model is told. `data` (the
    approval request the decision came from, say) joins the audit record. `call_id`: the
    call row the request was made for, where known.

    A refusal names the call first, as an operator action aimed at one does
    (operator_rules.named_target): a call the run does not have, one a re-run replaced, one
    no longer waiting (tool_call_rules.call_state_refusal), whatever the run did next (a
    run whose one waiting call was cancelled is queued, which says nothing of the call);
    then the run's state (operator_rules.decision_refusal)."""
    def refused(run: Run) -> str | None:
        step, call = call_named(run, step_name, call_ref)
        if call_id is not None and call.pk != call_id:
            # A re-run's new generation has a call of the same name (turn.index): a
            # decision on the earlier generation's call never authorises it.
            return (f"this decision is for tool call {call_ref} of an earlier generation of "
                    f"{step_name}, which a re-run replaced: it authorises nothing now")
        return call_state_refusal(DECIDE_TOOL_CALL, step, call) or decision_refusal(run)

    with transition_on(run_id, "decide_approval", actor=actor, now=now,
                       refused=refused) as change:
        run = change.run
        step, call = call_named(run, step_name, call_ref)
        if args_hash != call.args_hash:
            raise TransitionNotAllowed(
                f"the approval is for arguments with hash {args_hash[:12]}, but tool call "
                f"{call_ref} of {step_name} has arguments with hash {call.args_hash[:12]}: "
                "an approval never authorises other arguments")
        if actor.user_id is not None and actor.user_id == retried_by(call):
            raise SecondPersonRequired(
                f"{actor.label} sent tool call {call_ref} of {step_name} again: a second "
                "person decides its approval")
        # Applied as a step's stop-verdict approval is; it reads no spec, so no definition.
        effects.decided_by_person(change, effects.CallEffect(None, step, call),
                                  approved=approved, by=actor.label, comment=comment,
                                  **(data or {}))
    return run


def reconcile_tool_call(run_id: int, *, step_name: str, call_ref: str, verdict,
                        actor: Actor, reason: str, evidence: str = "",
                        looked_up: bool = False, now: datetime | None = None) -> Run:
    """Settle an unknown tool call with what a person or a lookup by key established.
    Found: the call succeeded; the run goes on (the model is told the result). NotFound:
    the call is marked failed (the model is told it did not happen), the run goes on.
    Undetermined: still unknown, the run stays with a person. `looked_up`: as for a
    step's reconcile."""
    require_evidence(verdict, evidence, f"reconcile tool call {call_ref} of {step_name}")
    with operator_transition(run_id, "reconcile_tool_call", actor=actor, reason=reason,
                             now=now, step_name=step_name, call_ref=call_ref) as op:
        run, change = op.run, op.change
        step, call = checked_call(op, "reconcile_tool_call", step_name, call_ref)
        before = audit_state(run, step)
        effect = effects.CallEffect(op, step, call)
        if looked_up:
            verdict = looked_up_verdict(effect, verdict, change.now)
        # "Not done" may be said before a slow request has landed: the model, told the call
        # did not happen, may ask for it again, and that repeat is sent with this key.
        call.key_open_for_repeat = isinstance(verdict, definition.NotFound)
        data = effect.data(evidence=evidence, **effects.settled_by_person(
            change, effect, verdict, evidence=evidence, reason=reason))
        # What may still have happened, by the one rule of an unsettled effect (a read's
        # unknown outcome, left by a terminate, changed nothing elsewhere).
        unsettled = unsettled_effects(op.steps)
        still_unknown = any(unsettled_effect.step == step.name for unsettled_effect in unsettled)
        if run.attention_reason == AttentionReason.ENDED_UNSETTLED:
            # A person ended the run while this call was unknown: settling it never sends
            # the agent on; once every effect is settled the run is terminated.
            if not still_unknown and step.status == StepStatus.UNKNOWN:
                step.status = StepStatus.FAILED
                step.error_class = ""
                step.error_message = "ended by a person; its tool calls are settled"
            change.step_changed(step)
            end_or_hold(change, unsettled, settled=(f"call {call_ref}", data["verdict"]))
        elif still_unknown:
            change.step_changed(step)
            change.move(ATTENTION, reason=still_unknown_reason(verdict, run.attention_reason,
                                                           looked_up=looked_up),
                        message=f"{step_name}: the outcome of a tool call is still unknown "
                                f"({data['verdict']} for call {call_ref})"
                                + (f": {verdict.reason}" if getattr(verdict, "reason", "")
                                   else ""))
        else:
            step.status = StepStatus.PENDING
            step.error_class, step.error_message = "", ""
            step.lookup_failures = 0
            change.step_changed(step)
            change.move(QUEUED)
        change.audit(AuditAction.RECONCILED, step=step, reason=reason, before=before,
                     after=audit_state(run, step), data=data)
    return run
