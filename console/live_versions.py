"""The version of a run page's live part, which its poll sends back (`shown`) and is answered
204 for while it is unchanged: computed from what the part shows, read without the run's
steps and without drawing anything.

It was a digest of the drawn part, so every poll of a run of 4,000 steps read each step and
drew megabytes of HTML to answer "nothing changed". The steps are stood for by the run's
row: every transition that changes a step writes its run's row in the same commit and
appends to its audit chain (runs.machine.transitions.kernel, save_changes; a claim records
the first intent with its own record), so a step cannot change while the row stays as it
was. What the part shows that is not written with the run is read as the drawing reads it
(a constant number of queries): the approval requests (a notification that failed), the
timeline's page (emails sent, webhook deliveries), and what the person may do."""

import hashlib

from django.utils.timesince import timesince

from runs.models import Run
from runs.operator.actions import ACTIONS

# Not shown, and the largest column of the row.
_LEFT_OUT = {"input"}
PERMISSIONS = sorted({action.permission for action in ACTIONS.values()})


def live_version(*, run: Run, approvals: list, timeline, grants, now, registered: bool,
                 poll: dict) -> str:
    """`approvals` as the part shows them (with .openable and .problem_shown), `timeline`
    its page of the timeline, `grants` the person's (console.permissions.grants_of), `now`
    the database's time, `registered` whether the run's workflow definition is, `poll` the
    page's own choices (a page of steps, of the timeline, of an agent's turns)."""
    row = [(f.attname, getattr(run, f.attname)) for f in Run._meta.concrete_fields
           if f.attname not in _LEFT_OUT]
    # The age of the last heartbeat, in the words the part shows it in: a worker gone
    # silent is seen growing older while nothing else changes.
    age = timesince(run.heartbeat_at, now) if run.lease_owner and run.heartbeat_at else ""
    shown_approvals = [(a.pk, a.status, a.requested_at, a.due_at, a.decided_by_id,
                        a.step_name, a.action, a.problem_shown, a.openable)
                       for a in approvals]
    may = [(codename, grants(codename).covers(run.workflow_id)) for codename in PERMISSIONS]
    parts = (row, age, shown_approvals, repr(timeline), may, registered,
             sorted(poll.items()))
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:20]
