"""The undo of an agent step's tool calls in the run's compensation: newest first, each with
its own compensation key and a checkpoint before and after (the executor's
agent_loop.compensate_agent_step calls these under the run's lease)."""

from datetime import datetime

from audit.actions import AuditAction

from ...agent_models import ToolCall
from ...definitions import definition
from ...models import Step
from .agent_calls import calls_of, fresh_call
from .effect_rows import CallEffect
from .kernel import Lease, Outcome
from .lease_cycle import holding
from .tool_call_rules import EFFECT_STANDS


def compensation_order(step: Step, spec: definition.AgentSpec) -> list[ToolCall]:
    """The calls of an agent step to undo, newest first: those whose effect stands and whose
    tool declares a compensation."""
    undoable = {name for name, tool in spec.tools.items() if tool.compensate_fn is not None}
    calls = [c for c in calls_of(step) if c.tool in undoable and c.status in EFFECT_STANDS]
    return sorted(calls, key=lambda c: (c.finished_at or c.updated_at, c.turn, c.index),
                  reverse=True)


def begin_tool_compensation(lease: Lease, step: Step, call: ToolCall, *,
                            now: datetime | None = None) -> ToolCall | None:
    with holding(lease, "tool_compensation", now) as change:
        if change is None:
            return None
        call = fresh_call(call)
        # The intent is the row; the record of the undo's outcome carries it.
        CallEffect(lease, step, call).undo_begun(change)
    return call


def record_tool_compensation(lease: Lease, step: Step, call: ToolCall, outcome: Outcome, *,
                             now: datetime | None = None) -> Lease:
    """A tool call's undo succeeded (a failure is the step's compensation failing, recorded
    by the lease cycle: the call stays compensating and is sent again with its key)."""
    with holding(lease, "tool_compensation", now) as change:
        if change is None:
            return lease
        CallEffect(lease, step, fresh_call(call)).undone(change, outcome.remote_ref,
                                                     AuditAction.TOOL_CALL_COMPENSATED)
    return lease
