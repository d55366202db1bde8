"""How a run's going forward was ended, as every reader tells it: the approval requests its
end closed (approvals.withdrawal), and the steps and tool calls it left waiting (the run
page, the API's run state, show_run).

A cancel ends a run as a terminate does (terminated, or held in attention until its
unsettled effects are settled): only the audit record of the ending tells them apart. A
step the run was waiting on when it was ended keeps its status `waiting` (kernel.end_waits:
the kept-event rules find an ended run by the event wait it still holds, a reopen waits on
with it, and the approvals sweep withdraws the request), so a reader says that wait is over.
"""

from audit.actions import AuditAction
from audit.models import AuditRecord

from ..models import AttentionReason, Run, RunStatus, Step, StepStatus

# The records of a person's ending of a run (kernel.terminate_in writes one or the other).
_ENDED_BY = {AuditAction.CANCELLED: "cancelled", AuditAction.TERMINATED: "terminated"}


def ended_by(run: Run) -> str:
    """How a person ended `run` (its status terminated, or held in attention until its
    unsettled effects are settled): "cancelled" or "terminated", by its last record of an
    ending, along the (run, seq) index."""
    last = (AuditRecord.objects.filter(run_id=run.pk, action__in=list(_ENDED_BY))
            .order_by("-seq").values_list("action", flat=True).first())
    return _ENDED_BY.get(last, "terminated")


def ending_of(run: Run) -> str | None:
    """What ended `run`, as said of it ("it was cancelled", "it was terminated", "it was
    compensated", "it is being compensated", "it was completed"), or None while it may
    still go forward. A run ended while an effect was unsettled, held in attention until
    each is settled, was cancelled or terminated already. One query, for a run a person
    ended: its last record of an ending, along the (run, seq) index."""
    status = run.status
    if status == RunStatus.TERMINATED or (
            status == RunStatus.ATTENTION
            and run.attention_reason == AttentionReason.ENDED_UNSETTLED):
        return f"it was {ended_by(run)}"
    if status in (RunStatus.COMPENSATING, RunStatus.COMPENSATION_FAILED):
        # An undo never goes forward again: the waits it began in are over.
        return "it is being compensated"
    if status in (RunStatus.COMPENSATED, RunStatus.COMPLETED):
        return f"it was {status}"
    return None


def wait_over(run: Run) -> str | None:
    """What a step or a tool call of `run` that still reads `waiting` says once the run's
    end ended its wait ("the wait ended with the run: it was cancelled"), or None while the
    run may still go forward (the wait is live). As ending_of: a query only for a run a
    person ended."""
    ending = ending_of(run)
    return None if ending is None else f"the wait ended with the run: {ending}"


def ended_waits(run: Run, steps: list[Step]) -> dict[str, str]:
    """The steps of `run` (`steps`, its rows) that still read `waiting` though the run's end
    ended their wait, by name, each with what ended it (wait_over). A query only for a run
    that has such a step and was ended by a person."""
    waiting = [s.name for s in steps if s.status == StepStatus.WAITING]
    if not waiting or (over := wait_over(run)) is None:
        return {}
    return dict.fromkeys(waiting, over)
