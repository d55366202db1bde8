"""How a person is told of an operator action and of a run's state: each action's label, as
the console's buttons show it (the one table of them: runs.operator.actions reads it), and
each run state in words. A refusal for the run's state (operator_rules.state_refusal) names
both so, whichever door it is read at (the console, the API, the command line, a bulk job's
outcome), and never the transition's internal name."""

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


def not_done(label: str, why) -> str:
    """An action that was not done, as every door tells it: "<label> was not done: <why>";
    where `why` begins with the label already (a refusal for the run's state, "Wake now is
    not possible for run 12 ...", a reason missing, "Terminate needs a reason"), `why` alone,
    not the label twice."""
    why = str(why)
    return why if why.startswith((f"{label} ", f"{label}:")) else f"{label} was not done: {why}"
