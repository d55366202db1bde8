"""How a person is told of an operator action and of a run's state: each action's label, as
the console's buttons show it (the one table of them: runs.operator.actions reads it), and
each run state in words. A refusal for the run's state (operator_rules.state_refusal) names
both so, whichever door it is read at (the console, the API, the command line, a bulk job's
outcome), and never the transition's internal name. A refusal for a tool call's state
(tool_call_rules.call_state_refusal) names the call's state so."""

from ...agent_models import ToolCallStatus
from ...models import RunStatus

LABELS = {
    "resume": "Resume",
    "reconcile": "Reconcile",
    "retry_step": "Retry step",
    "ask_again": "Ask the model again",
    "compensate": "Compensate",
    "confirm_compensation": "Confirm the undo",
    "cancel": "Cancel",
    "terminate": "Terminate",
    "event_received": "Deliver event",
    "skip_event": "Skip event",
    "wake_timer": "Wake now",
    "reopen": "Reopen",
    "rerun_from_step": "Re-run from step",
    "reconcile_tool_call": "Reconcile tool call",
    "retry_tool_call": "Retry tool call",
    "compensate_tool_call": "Undo tool call",
    "cancel_tool_call": "Cancel tool call",
}

STATE_WORDS = {
    RunStatus.QUEUED: "it is queued for a worker",
    RunStatus.RUNNING: "a worker is running it",
    RunStatus.WAITING: ("it is waiting for an event, a timer, an approval, its next try or "
                        "a paused dispatch"),
    RunStatus.ATTENTION: "it is waiting for a person",
    RunStatus.COMPENSATING: "its completed steps are being undone",
    RunStatus.COMPLETED: "it has completed",
    RunStatus.COMPENSATED: "its completed steps were undone",
    RunStatus.COMPENSATION_FAILED: "an undo failed and it is waiting for a person",
    RunStatus.TERMINATED: "it was terminated",
}

CALL_STATE_WORDS = {
    ToolCallStatus.PENDING: "it has not been made yet",
    ToolCallStatus.RUNNING: "it is being made now",
    ToolCallStatus.SCHEDULED: "it waits to be made again after a failed try",
    ToolCallStatus.SUCCEEDED: "it succeeded",
    ToolCallStatus.FAILED: "it failed, and nothing changed",
    ToolCallStatus.UNKNOWN: "its outcome is unknown: it may have happened",
    ToolCallStatus.INVALID: "its arguments did not pass its tool's schema: it was never made",
    ToolCallStatus.WAITING: "it waits for a person's approval of its arguments",
    ToolCallStatus.DECLINED: "a person declined it: it was never made",
    ToolCallStatus.CANCELLED: "a person cancelled it: it was never made",
    ToolCallStatus.COMPENSATING: "its undo is under way",
    ToolCallStatus.COMPENSATED: "it was undone",
    ToolCallStatus.COMPENSATION_FAILED: "its undo failed: its effect still stands",
}


def not_done(label: str, why) -> str:
    """An action that was not done, as every door tells it: "<label> was not done: <why>";
    where `why` begins with the label already (a refusal for the run's state, "Wake now is
    not possible for run 12 ...", a reason missing, "Terminate needs a reason"), `why` alone,
    not the label twice."""
    why = str(why)
    return why if why.startswith((f"{label} ", f"{label}:")) else f"{label} was not done: {why}"
