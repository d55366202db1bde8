"""What a wait step's row (a sleep, an event wait, an approval, a step with the stop verdict
waiting for a person's approval of its attempt, an agent step whose tool call waits for one)
keeps as its wait begins and as it ends: the try at hand, never the error of an earlier try.
That error is evidence, and stays where it was written: in the audit record of the try it
ended (the timeout's, the rejection's, the failure's)."""

from datetime import datetime

from ...agent_models import ToolCall, ToolCallStatus
from ...models import Step, StepStatus


def wait_began(step: Step, now: datetime, *, call: ToolCall | None = None) -> None:
    """`step` waits from `now` (from when it first waited, if it waits again), with its tool
    call `call` if the call is what waits. A wait begun again (a person resumed the run its
    timeout or a rejection failed, a retry after an attempt's error) is the current try: the
    rows keep no error of the try before, which show_run, the run page and the API would
    show beside the step waiting as if it were current."""
    step.status = StepStatus.WAITING
    step.started_at = step.started_at or now
    step.error_class, step.error_message = "", ""
    if call is not None:
        # The call's started_at is when its retry budget began, which no wait moves.
        call.status = ToolCallStatus.WAITING
        call.error_class, call.error_message = "", ""


def wait_ended(step: Step) -> None:
    """A wait that ended and lets the run go on (its event came or was skipped, its
    timeout's default taken, its approval given) keeps no error of an earlier try of it (a
    timeout or a rejection that failed it before a person asked again), as an effect's
    success clears its own (effects.stands)."""
    step.error_class, step.error_message = "", ""
