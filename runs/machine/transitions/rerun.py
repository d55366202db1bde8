"""Re-run a finished or stopped run from a chosen step: that step and the later ones are sent
again as a new attempt generation, with new idempotency keys (runs.machine.keys), so a receiver that
honours keys performs them anew rather than answering with the old result; the earlier
steps' results are reused as they stand.

An agent step in the range starts its conversation afresh in the new generation: the model
is asked anew, and each tool call it asks for gets a key of that generation
(keys.tool_call_key). The earlier generation's turns and calls stay stored as its history;
the agent loop reads only the step's current generation.

The effects that already stand from the chosen step on are not undone by a re-run: they are
named to the person before (runs.operator.actions) and written, with every re-run step's previous
state and key, into the audit record, which is how the run page shows each generation. A
high-impact effect standing needs a second person (operator_rules.needs_second_person)."""

from datetime import datetime

from audit.actions import AuditAction
from audit.chain import Actor

from ...agent_models import AgentTurn, ToolCall, ToolCallStatus
from ...definitions import definition
from ...models import Run, Step, StepStatus
from ..keys import compensation_key, step_key
from .kernel import DONE_STEP_STATUSES, QUEUED, audit_state, reset_budget
from .operator import four_eyes_data, operator_transition
from .rerun_rules import rerun_range, standing_effects

# The calls of a replaced generation that never ran: the re-run cancels them, so nothing
# (an approval decided late, say) runs them after their conversation was abandoned.
NEVER_RAN = (ToolCallStatus.PENDING, ToolCallStatus.SCHEDULED, ToolCallStatus.WAITING)


def _cancel_never_ran(step: Step, generation: int, now: datetime) -> list[str]:
    calls = ToolCall.objects.filter(step=step, generation=step.generation,
                                    status__in=NEVER_RAN)
    refs = [f"{turn}.{index}" for turn, index in calls.values_list("turn", "index")]
    calls.update(status=ToolCallStatus.CANCELLED, finished_at=now, next_attempt_at=None,
                 error_message=f"never ran: the re-run as generation {generation} replaced "
                               "its conversation", updated_at=now)
    return refs


def _previous(step: Step) -> dict:
    """What the audit record keeps of a step's previous generation. An agent step's turns
    and tool calls stay stored under that generation (runs.agent_models): the record
    counts them."""
    kept = {}
    if step.kind == definition.AGENT:
        kept = {"turns": AgentTurn.objects.filter(step=step, generation=step.generation).count(),
                "tool_calls": ToolCall.objects.filter(step=step,
                                                      generation=step.generation).count()}
    return {"step": step.name, "generation": step.generation, "status": step.status,
            "key": step.idempotency_key, "remote_ref": step.remote_ref,
            "attempt": step.attempt, "error_message": step.error_message[:500],
            "finished_at": step.finished_at.isoformat() if step.finished_at else None,
            **kept}


def rerun_from_step(run_id: int, *, step_name: str, actor: Actor, reason: str,
                    approved_by: Actor | None = None, now: datetime | None = None) -> Run:
    """Send `step_name` and the later steps of a finished or stopped run again as a new
    generation with new keys; the earlier steps' results are reused. Needs a second person
    where a high-impact effect stands from that step on (`approved_by`)."""
    with operator_transition(run_id, "rerun_from_step", actor=actor, reason=reason, now=now,
                             step_name=step_name, approved_by=approved_by) as op:
        run, change, step = op.run, op.change, op.step
        before = {**audit_state(run, step), "generation": run.generation}
        sent_again = rerun_range(op.steps, step)
        standing = [str(e) for e in standing_effects(op.steps, step)]
        previous = [_previous(s) for s in sent_again]
        generation = run.generation + 1
        for s, kept in zip(sent_again, previous, strict=True):
            if s.kind == definition.AGENT:
                kept["cancelled_calls"] = _cancel_never_ran(s, generation, change.now)
        run.generation = generation
        for s in sent_again:
            s.generation = generation
            s.idempotency_key = step_key(run.workflow_name, run.business_key, s.name,
                                         s.version, generation)
            if s.compensation_key:
                s.compensation_key = compensation_key(run.workflow_name, run.business_key,
                                                      s.name, s.version, generation)
            s.status = StepStatus.PENDING
            reset_budget(s)
            s.intended_action = ""
            s.compensation_attempt, s.compensation_ref = 0, ""
            s.remote_ref, s.result = "", None
            s.error_class, s.error_message = "", ""
            s.lease_owner, s.lease_expires_at = "", None
            s.started_at = s.finished_at = None
            change.step_changed(s)
            # The key, its generation and the run's generation change only here: written in
            # this transaction rather than on every checkpoint's update of a step.
            Step.objects.filter(pk=s.pk).update(
                generation=generation, idempotency_key=s.idempotency_key,
                compensation_key=s.compensation_key)
        Run.objects.filter(pk=run.pk).update(generation=generation)
        run.steps_done = sum(1 for s in op.steps if s.position < step.position
                             and s.status in DONE_STEP_STATUSES)
        run.current_step = step.name
        run.cancel_requested = False
        run.finished_at = None
        run.next_wake_at = None
        change.move(QUEUED)
        change.audit(AuditAction.RERUN_FROM_STEP, step=step, reason=reason, before=before,
                     after={**audit_state(run, step), "generation": generation},
                     data=four_eyes_data({"generation": generation,
                                           "previous_generation": generation - 1,
                                           "from_step": step.name, "standing": standing,
                                           "previous_steps": previous}, approved_by))
    return run
