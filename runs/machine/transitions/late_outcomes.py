"""An effect's outcome that arrives once its run has moved on: the late result of a
fenced-off worker (late_result), kept as evidence and, on a run that ended while the effect
was in flight, recorded on its row; and an undo the run's end left in doubt, settled by
its sender after all (undo_settled: a worker's late result, or a person's undo of one tool
call, agent_operator.record_tool_call_undo). Nothing else moves: the run stays as it
ended. The rest of the effect machine is effects'."""

from audit.actions import AuditAction
from audit.chain import Actor

from ...models import Run
from .effect_rows import SUCCEEDED, UNKNOWN, CallEffect, Effect
from .effects import stands
from .in_flight import (
    undo_in_doubt,
    undo_in_doubt_at_end,
    undo_stopped_by_end,
    undone_by_calls,
    undone_so_far,
)
from .kernel import TERM, Change, Lease, Outcome
from .tool_call_rules import calls_of


def late_result(run: Run, lease: Lease, effect: Effect, outcome: Outcome, now) -> None:
    """A result that arrived after the lease was taken over: kept in the run's log as
    evidence, changing no state, in the transaction that found the lease fenced off (the
    run locked). A run terminated while the effect was in flight gets a success recorded
    on it, since nobody else will: an effect sent, as succeeded; an undo sent (the lease
    was compensating), as undone (undo_settled: with a tool call's, its agent step once none
    of its calls is in doubt). Only those rows move: the run stays as it ended, its
    compensation not carried on."""
    change = Change(run, None, Actor.system(lease.worker), now)
    data = effect.data(
        # "claim", not "token": the redaction filter rightly masks anything named token.
        worker=lease.worker, claim=lease.token, current_claim=run.fencing_token,
        succeeded=outcome.succeeded, remote_ref=outcome.remote_ref,
        value=effect.sealed(outcome.value),
        error=outcome.error.message if outcome.error else "")
    current = effect.fresh()
    landed = run.status == TERM and outcome.succeeded
    # The same undo (its key) or the same attempt (the effect's key) as the row's now: a
    # row a rerun gave new keys is another effect, which this result says nothing about.
    same_undo = effect.row.compensation_key == current.row.compensation_key
    same_effect = effect.row.idempotency_key == current.row.idempotency_key
    if landed and lease.compensating and same_undo and undo_stopped_by_end(current.row):
        # The end settled the undo as failed, its outcome unknown (in_flight.undo_ended),
        # or an agent step's as its calls stood then: the outcome is known now. A row that
        # failed its undo otherwise keeps that.
        undo_settled(change, current, outcome.remote_ref, AuditAction.LATE_RESULT_RECORDED,
                     **data)
    elif landed and not lease.compensating and same_effect and current.row.status == UNKNOWN:
        before = current.row.status
        stands(change, current, outcome.value, outcome.remote_ref)
        current.save(change)
        change.audit(AuditAction.LATE_RESULT_RECORDED, step=current.step,
                     before={current.status_key: before},
                     after={current.status_key: SUCCEEDED,
                            "remote_ref": current.row.remote_ref}, data=data)
    else:
        change.audit(AuditAction.LATE_RESULT, step=effect.step, data=data)
    change.save()


def undo_settled(change: Change, effect: Effect, remote_ref: str, action: str, /,
                 **data) -> None:
    """An undo a run's end left in doubt (in_flight.undo_in_doubt_at_end), or an agent
    step's it stopped with its calls undone so far (in_flight.undo_stopped_by_end),
    succeeded, its sender says after all (a worker's, late_result; a person's undo of one
    tool call, agent_operator.record_tool_call_undo): the row is undone. The end left a
    tool call's agent step in doubt with it: once none of its calls is in doubt
    (in_flight.undo_in_doubt), the step says what stands by its calls (in_flight.undone_by_calls),
    and the record of the settle names its move. Nothing else moves: the run stays as it
    ended."""
    step = effect.step
    if isinstance(effect, CallEffect) and undo_in_doubt_at_end(step):
        others = [c for c in calls_of(step) if c.pk != effect.row.pk]  # this one is undone
        if not any(undo_in_doubt(c) for c in others):
            before = step.status
            undone_so_far(step, undone_by_calls(others))
            data["step_status"] = {"before": before, "after": step.status}
    effect.undone(change, remote_ref, action, **data)
