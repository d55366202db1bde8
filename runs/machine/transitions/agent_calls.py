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
from dataclasses import dataclass
from datetime import datetime

from django.db.models import F

from audit.actions import AuditAction
from audit.models import AuditRecord

from ...agent_models import AgentTurn, ToolCall, ToolCallStatus
from ...definitions import definition
from ...models import AttentionReason, Run, Step, StepStatus
from ..errors import Classified, TransitionNotAllowed
from . import effects, late_outcomes
from .clashes import written_again_on_clash
from .compensation import hold_undo_missing
from .kernel import (  # the package's shared vocabulary
    ATTENTION,
    Lease,
    Outcome,
    audit_state,
    halt,
    lock_run,
    release_calls_in_flight,
    transition_time,
)
from .lease_cycle import holding
from .tool_call_rules import call_named, call_refusal, last_turn, tool_of

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
    # A summary of the turns before this index (runs.agents.agent_history); 0: an ordinary turn.
    summarises: int = 0
    # A summary's reference to the artifact holding the transcript of the turns it covers,
    # or a long final answer's to the artifact holding it whole (runs.agents.turn_bounds).
    transcript: dict | None = None
    # Why none of the tool calls asked for is taken (set where the turn is made storable).
    refused: str = ""
    # The content as written, sealed, where the stored content masks part of it (set where
    # the turn is made storable: AgentTurn.sealed_content).
    sealed_content: str = ""


def args_hash(arguments) -> str:
    """The hash a person's approval of a tool call is bound to."""
    return hashlib.sha256(json.dumps(arguments, sort_keys=True, separators=(",", ":"),
                                     default=str).encode()).hexdigest()


def turns_of(step: Step) -> list[AgentTurn]:
    """The model turns of the step's current generation."""
    return list(AgentTurn.objects.filter(step=step, generation=step.generation)
                .order_by("index"))


def agent_spec(lease: Lease, step: Step) -> definition.AgentSpec:
    return lease.definition.step(step.name)


def call_data(call: ToolCall, **more) -> dict:
    return {"tool_call": call.ref, "tool": call.tool, **more}


# --- a tool call ---------------------------------------------------------------------------

def fresh_call(call: ToolCall) -> ToolCall:
    """The call as committed (the run's lock is held: nobody else changes it meanwhile)."""
    return ToolCall.objects.get(pk=call.pk)


def save_call(call: ToolCall, now: datetime) -> None:
    call.updated_at = now
    call.save()


def begin_tool_call(lease: Lease, step: Step, call: ToolCall, *,
                    now: datetime | None = None) -> ToolCall | None:
    """The intent checkpoint: the call running, its attempt counted, its key in the audit
    record. Returns the call as recorded, or None if nothing is sent: the lease was lost,
    a cancel request stopped the run, or the call waits for a person's approval of its
    arguments. It waits when its tool has the stop verdict (stop_gate.is_gated) or asks for
    approval of these arguments, unless a person approved exactly them: the one wait a
    step's attempts go through too (effects.held_for_approval). Rolled back by the database
    for a clash with another session, it is written again before anything is sent
    (clashes): the call is made once, under the intent that committed."""
    return written_again_on_clash(
        lease, step, f"the intent of tool call {call.ref} ({call.tool}) of step {step.name}",
        lambda step: begin_tool_call_once(lease, step, call, now))


def begin_tool_call_once(lease: Lease, step: Step, call: ToolCall,
                         now: datetime | None) -> ToolCall | None:
    where = f"before tool call {call.ref} ({call.tool})"
    with holding(lease, "tool_call", now, cancel_before=where) as change:
        if change is None:
            return None
        call = fresh_call(call)
        effect = effects.CallEffect(lease, step, call)
        if effects.held_for_approval(change, lease, effect):
            return None
        effect.begun(change)
    return call


def record_tool_outcome(lease: Lease, step: Step, call: ToolCall, outcome: Outcome, *,
                        now: datetime | None = None) -> Lease:
    """The outcome checkpoint of one tool call, by the effect machine's rules (effects.succeed,
    effects.fail), as a step's: succeeded; transient (sent again with the tool's backoff,
    within its budget); unknown (settled by key before anything else runs); permanent or
    unclassified (a person). A result that arrives after the lease was taken over is kept
    as evidence only (late_outcomes.late_result). Rolled back by the database for a clash
    with another session, it is written again, as a step's outcome is (clashes)."""
    return written_again_on_clash(
        lease, step, f"the outcome of tool call {call.ref} ({call.tool}) of step {step.name}",
        lambda step: record_tool_outcome_once(lease, step, call, outcome, now))


def record_tool_outcome_once(lease: Lease, step: Step, call: ToolCall, outcome: Outcome,
                             now: datetime | None) -> Lease:
    effect = None

    def where() -> str:
        # Read once the outcome is recorded: an unknown one settled nothing.
        came_to = ", its outcome unknown" if effect.row.status == S.UNKNOWN else " settled"
        return f"after tool call {call.ref} ({call.tool}){came_to}"

    with holding(lease, "tool_call", now, cancel_after=where) as change:
        if change is None:
            late_outcomes.late_result(lock_run(lease.run.pk), lease,
                                      effects.CallEffect(lease, step, call), outcome,
                                      transition_time(now))
            return lease
        effect = effects.CallEffect(lease, step, fresh_call(call))
        if outcome.succeeded:
            effects.succeed(change, effect, outcome.value, outcome.remote_ref,
                            AuditAction.TOOL_CALL_SUCCEEDED)
        else:
            effects.fail(change, lease, effect, outcome)
    return lease


def call_not_made(lease: Lease, step: Step, call: ToolCall, error: Classified, *,
                  now: datetime | None = None) -> Lease:
    """`call` failed before its intent, so nothing was sent: its stored arguments could not
    be opened (errors.classify). Recorded by the effect machine's rule (effects.fail), as a
    failure after the call is, its attempt not counted; a cancel request takes effect
    instead. Rolled back by the database for a clash with another session, it is written
    again (clashes)."""
    return written_again_on_clash(
        lease, step, f"the failure of tool call {call.ref} ({call.tool}) of step {step.name} "
                     "before it was made",
        lambda step: call_not_made_once(lease, step, call, error, now))


def call_not_made_once(lease: Lease, step: Step, call: ToolCall, error: Classified,
                       now: datetime | None) -> Lease:
    with holding(lease, "tool_call", now,
                 cancel_before=f"before tool call {call.ref} ({call.tool})") as change:
        if change is None:
            return lease
        effects.fail(change, lease, effects.CallEffect(lease, step, fresh_call(call)),
                     Outcome.failure(error))
    return lease


def stored_result(lease: Lease, step: Step, call: ToolCall, value):
    """`value` as the call's row keeps a result (effects.stands: redacted, the tool's
    sensitive fields sealed): what an artifact of it must hold too."""
    return effects.CallEffect(lease, step, call).sealed(value)


def take_back_calls(lease: Lease, step: Step, running: list[ToolCall], *,
                    now: datetime | None = None) -> Lease:
    """Tool calls a dead worker left running: a write or notify may have acted, so its
    outcome is unknown (settled by key next); a read simply runs again. Rolled back by the
    database for a clash with another session, it is written again (clashes)."""
    return written_again_on_clash(
        lease, step, f"the take-back of {len(running)} tool call(s) of step {step.name}",
        lambda step: take_back_calls_once(lease, step, running, now))


def take_back_calls_once(lease: Lease, step: Step, running: list[ToolCall],
                         now: datetime | None) -> Lease:
    with holding(lease, "tool_call", now) as change:
        if change is None:
            return lease
        still_running = [call for call in map(fresh_call, running) if call.status == S.RUNNING]
        release_calls_in_flight(
            change, step, calls=still_running, action=AuditAction.STEP_LEASE_EXPIRED,
            why="the worker running it stopped before its outcome was recorded")
        change.step_changed(step)
    return lease


def settle_tool_call(lease: Lease, step: Step, call: ToolCall, verdict, *, error: str = "",
                     now: datetime | None = None) -> Lease:
    """Settle an unknown tool call with what the lookup by its key found, by the one rule of
    an unknown outcome (effects.settle), as a step's is settled. Rolled back by the
    database for a clash with another session, it is written again (clashes)."""
    return written_again_on_clash(
        lease, step, f"the lookup's verdict on tool call {call.ref} ({call.tool}) of step "
                     f"{step.name}",
        lambda step: settle_tool_call_once(lease, step, call, verdict, error, now))


def settle_tool_call_once(lease: Lease, step: Step, call: ToolCall, verdict, error: str,
                          now: datetime | None) -> Lease:
    with holding(lease, "tool_call", now) as change:
        if change is None:
            return lease
        effects.settle(change, lease, effects.CallEffect(lease, step, fresh_call(call)), verdict,
                       error=error)
    return lease


def call_unworkable(lease: Lease, step: Step, call: ToolCall, problem: str, *,
                    now: datetime | None = None) -> Lease:
    """No rule can work `call` as the code stands (tool_call_rules.unworkable_call says
    why): the run waits for a person, as a run whose step a release removed does
    (lease_cycle), the call left as it stands. Resumed once the code is fixed, it goes on;
    a compensation held so (compensation.hold_undo_missing) goes on undoing once
    compensated again. Rolled back by the database for a clash with another session, it is
    written again (clashes)."""
    return written_again_on_clash(
        lease, step, f"the stop for tool call {call.ref} ({call.tool}) of step {step.name}",
        lambda step: call_unworkable_once(lease, step, call, problem, now))


def call_unworkable_once(lease: Lease, step: Step, call: ToolCall, problem: str,
                         now: datetime | None) -> Lease:
    with holding(lease, "call_unworkable", now) as change:
        if change is None:
            return lease
        run = change.run
        message = f"{step.name} tool call {call.ref}: {problem}"
        if lease.compensating:
            hold_undo_missing(change, lease, step, message)
            return lease
        before = audit_state(run, step)
        if step.status == StepStatus.RUNNING:
            step.status = StepStatus.PENDING  # nothing of it is in flight
        step.lease_owner, step.lease_expires_at = "", None
        change.step_changed(step)
        halt(change, lease, step, before, ATTENTION, AttentionReason.DEFINITION_MISSING,
             message, message, action=AuditAction.DEFINITION_MISSING)
    return lease


# --- a person's approval of a tool call ----------------------------------------------------

def waiting_tool_calls(run: Run) -> list[ToolCall]:
    """The tool calls of `run` that wait for a person's approval."""
    return list(ToolCall.objects.filter(step__run=run, status=S.WAITING,
                                        generation=F("step__generation"))
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


def checked_call(op, action: str, step_name: str, call_ref: str) -> tuple[Step, ToolCall]:
    """The step (the row operation `op` locked and will save) and its tool call `call_ref`,
    once tool_call_rules.call_refusal allows `action` on it: the one check of every operator
    action aimed at one call, whoever asks."""
    step, call = call_named(op.run, step_name, call_ref)
    step = op.step
    refused = call_refusal(action, op.run, step, call, tool_of(op.definition, step, call),
                           last_turn=last_turn(step))
    if refused:
        raise TransitionNotAllowed(refused)
    return step, call

def find_call(run: Run, step_name: str, call_ref: str) -> ToolCall:
    """Tool call `call_ref` ("turn.index") of `step_name` in `run`, read without a lock."""
    return call_named(run, step_name, call_ref)[1]
