"""Kept events refused for a run: a kept event that the run waiting for it cannot take (its
version's schema refuses the payload), or that came for a run a person ended (run_ended), is
marked refused for that run and said on its log, changing no state. No path delivers a
refused row (transitions.events: _store_event); a person may deliver the event by hand.
runs.waiting.kept decides when; these write it."""

from datetime import datetime

from audit.actions import AuditAction
from audit.chain import Actor

from ... import store
from ...models import AttentionReason, ExternalEvent, Run
from ...world_models import EVENT_STATES
from ..endings import ended_by
from .kernel import ATTENTION, TERM, Change, lock_run, transition_time


def refuse_kept_event(run_id: int, *, kept: ExternalEvent, step_name: str, reason: str,
                      fields: list[str], actor: Actor, now: datetime | None = None) -> bool:
    """A kept event that the run waiting for it under `step_name` cannot take (its version's
    schema refuses the payload at `fields`): in one transaction the row is marked refused for
    the run, with `reason`, and the run's log says so (EVENT_REFUSED), changing no state, so
    that a person looking at the waiting run sees that an event came. Only the call that
    marks the row records it. Returns whether this call marked it (False: another path did
    first, or it was consumed meanwhile; nothing written)."""
    with store.current().transaction():
        change = Change(lock_run(run_id), None, actor, transition_time(now))
        # Field names only: the failing values are the payload's, which may hold secrets.
        where = ", ".join(fields) or "the payload"
        return _refused(change, kept, step_name, reason, {
            "fields": fields,
            "error": f"kept event refused: version {change.run.workflow_version}'s schema "
                     f"fails at {where}; it is not delivered, nor tried again"})


def run_ended(run: Run) -> str | None:
    """Why `run` takes no event on its own, or None: a person ended it (terminated, or ended
    while an effect was unsettled and held only until it is settled). An event that comes
    then was sent to a run that no longer listens; reopening it does not make it heard."""
    if run.status == TERM:
        return f"run {run.pk} was {ended_by(run)}"
    if run.status == ATTENTION and run.attention_reason == AttentionReason.ENDED_UNSETTLED:
        return (f"run {run.pk} was {ended_by(run)} (it waits only for its unsettled effects "
                "to be settled)")
    return None


def refuse_for_ended_run(run_id: int, *, kept: ExternalEvent, step_name: str, actor: Actor,
                         now: datetime | None = None) -> bool:
    """A kept event that came for a run a person ended (run_ended, judged under the run's
    lock), for its wait `step_name`: the row is marked refused for the run and the run's log
    says so (EVENT_REFUSED), changing no state. No path delivers a refused row (_store_event):
    a run reopened later does not consume it; a person may deliver the event by hand. Returns
    whether this call marked it (False, nothing written: the run has not ended, or the row
    was consumed or marked already)."""
    with store.current().transaction():
        change = Change(lock_run(run_id), None, actor, transition_time(now))
        if (why := run_ended(change.run)) is None:
            return False
        reason = (f"{why} when it came: it is not delivered to the run, nor tried again, even "
                  "if the run is reopened; a person may deliver it by hand (Deliver event)")
        return _refused(change, kept, step_name, reason, {
            "run_ended": change.run.status, "error": f"kept event refused: {reason}"})


def _refused(change: Change, kept: ExternalEvent, step_name: str, reason: str,
             data: dict) -> bool:
    """Mark `kept` refused for the locked run of `change`, with `reason`, and record it on the
    run (EVENT_REFUSED, with `data`): only if no path consumed or marked it first."""
    run = change.run
    # An expired row is nobody's: it is not refused for a run either.
    marked = ExternalEvent.objects.filter(EVENT_STATES["kept"], pk=kept.pk).update(
        refused_at=change.now, refused_run_id=run.pk, refused_reason=reason)
    if not marked:
        return False
    change.audit(AuditAction.EVENT_REFUSED, step_name=step_name, data={
        "event": f"{kept.source}:{kept.event_id}", "event_name": kept.event_name, **data})
    change.save()
    return True
