"""The undo of an agent step's tool calls in the run's compensation: newest first, each with
its own compensation key and a checkpoint before and after (the executor's
agent_loop.compensate_agent_step calls these under the run's lease)."""

from datetime import datetime

from audit.actions import AuditAction

from ...agent_models import ToolCall
from ...models import Step
from . import late_outcomes
from .agent_calls import fresh_call
from .clashes import written_again_on_clash
from .compensation import pauses_before_undo, undos_to_come
from .effect_rows import CallEffect
from .kernel import Lease, Outcome, lock_run, transition_time
from .lease_cycle import holding


def begin_tool_compensation(lease: Lease, step: Step, call: ToolCall, *,
                            behind: list[ToolCall] | tuple = (),
                            now: datetime | None = None) -> ToolCall | None:
    """The intent of one call's undo. None, with nothing to send: the lease was lost, or the
    call's tool is high impact and nobody confirmed its undo yet, so the run now waits for a
    person (compensation.pauses_before_undo, the step's rule too); `behind` are the calls of
    the step to undo after it, which wait with the older steps' undos. Rolled back by the
    database for a clash with another session, it is written again before the undo is sent
    (clashes)."""
    return written_again_on_clash(
        lease, step, f"the undo's intent of tool call {call.ref} ({call.tool}) of step "
                     f"{step.name}",
        lambda step: begin_tool_compensation_once(lease, step, call, behind, now))


def begin_tool_compensation_once(lease: Lease, step: Step, call: ToolCall,
                                 behind: list[ToolCall] | tuple,
                                 now: datetime | None) -> ToolCall | None:
    with holding(lease, "tool_compensation", now) as change:
        if change is None:
            return None
        call = fresh_call(call)
        effect = CallEffect(lease, step, call)
        # Named only if it pauses: building them at every undo made an agent's undos
        # quadratic in its calls.
        def waiting() -> list[str]:
            return [effect.name, *(CallEffect(lease, step, c).name for c in behind),
                    *(s.name for s in undos_to_come(lease) if s.pk != step.pk)]

        if pauses_before_undo(change, lease, effect, waiting=waiting):
            return None
        # The intent is the row; the record of the undo's outcome carries it.
        effect.undo_begun(change)
    return call


def record_tool_compensation(lease: Lease, step: Step, call: ToolCall, outcome: Outcome, *,
                             now: datetime | None = None) -> Lease:
    """A tool call's undo succeeded (a failure is the step's compensation failing, recorded
    by the lease cycle: the call is sent again with its key while resends remain, then
    fails with the step, in_flight.calls_not_undone). Fenced off (the run was ended or taken
    back meanwhile), the result is kept as evidence, and settles the undo an end left in
    doubt (late_outcomes.late_result). Rolled back by the database for a clash with another
    session, it is written again, as a step's undo's outcome is (clashes)."""
    return written_again_on_clash(
        lease, step, f"the undo's outcome of tool call {call.ref} ({call.tool}) of step "
                     f"{step.name}",
        lambda step: record_tool_compensation_once(lease, step, call, outcome, now))


def record_tool_compensation_once(lease: Lease, step: Step, call: ToolCall, outcome: Outcome,
                                  now: datetime | None) -> Lease:
    with holding(lease, "tool_compensation", now) as change:
        if change is None:
            late_outcomes.late_result(lock_run(lease.run.pk), lease,
                                      CallEffect(lease, step, call), outcome,
                                      transition_time(now))
            return lease
        CallEffect(lease, step, fresh_call(call)).undone(change, outcome.remote_ref,
                                                     AuditAction.TOOL_CALL_COMPENSATED)
    return lease
