"""What one pass of the approvals sweep compares, so that its reads follow what is new and
what is due, not how many requests are pending.

Two of the sweep's questions are answered only by comparing a row with another table: which
waits of runs (runs.ApprovalWait) have no open request, and which pending requests their run
no longer waits for (approvals.withdrawal). Asked of every row, every pass (every few
seconds) would read every pending request twice to find, nearly always, none. So a pass
asks them of:
- the waits past a position kept in the database (runs.PassPosition): every wait up to it
  has its request or can never be asked (waits.askable), and the position moves on over
  each new wait once it has its own. A wait that can never be asked is passed over, not
  waited for: held below it, every pass would read every wait after it. It is reported
  instead (the pass's `unaskable`, and a warning naming it) by the pass that meets it and
  by every full look while its row lasts, and stays listed with the waits in the admin;
- the pending requests whose timeout or reminder is due now, along their partial indexes:
  neither is ever applied to a request its run stopped waiting for;
and, once every FULL_LOOK_EVERY (and at the first pass), of every wait and every pending
request. That full look is the backstop for what no position or due time shows: a wait
whose transaction committed after a later wait had been passed over, a request closed while
its run still waits (a decision the run refused), a run that stopped waiting while no timer
of its request is due. Those are found within FULL_LOOK_EVERY, no longer within a pass; an
operator's action withdraws the requests it ends at once (withdraw_unawaited_of), and a
person deciding one the run stopped waiting for withdraws it then (decisions.decide).
"""

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count, Max, Min
from django.db.models.functions import Now

from runs import store
from runs.models import PassPosition

from .requests import open_pending_requests
from .waits import askable, unasked, waits_after

logger = logging.getLogger(__name__)

ASKED_JOB = "approvals.sweep:asked-waits"
FULL_LOOK_JOB = "approvals.sweep:full-look"
FULL_LOOK_EVERY = timedelta(minutes=1)


@dataclass(frozen=True)
class Scope:
    # Compare every wait and every pending request.
    full: bool
    # Every wait up to this id has had its request (ids only grow): a pass that is not a
    # full look reads the waits past it.
    asked_through: int


def of_pass(given: datetime | None) -> Scope:
    """What the pass compares: a full look if none was made within FULL_LOOK_EVERY before
    the database's clock (`given`, a caller's time, a test's, stands in for it; a clock
    that went back, as a test's may, counts as none), else the new waits and the due
    requests."""
    kept = {job: (after_id, at, now) for job, after_id, at, now in PassPosition.objects
            .filter(job__in=[ASKED_JOB, FULL_LOOK_JOB])
            .values_list("job", "after_id", "updated_at", Now())}
    looked = kept.get(FULL_LOOK_JOB)
    full = looked is None or not looked[1] <= (given or looked[2]) < looked[1] + FULL_LOOK_EVERY
    return Scope(full=full, asked_through=kept.get(ASKED_JOB, (0, None))[0])


@dataclass(frozen=True)
class Asked:
    # Requests opened by the pass.
    opened: int
    # The position for the next pass (Scope.asked_through).
    asked_through: int
    # Waits the pass read that can never be asked (waits.askable).
    unaskable: int


def _waits_read(after: int | None, *,
                counted: bool = True) -> tuple[int | None, int | None, int]:
    # One read of the waits past `after` (all of them with None): the first that has no
    # request and could have one, the last, and (`counted`) how many can never be asked.
    unaskable = {"unaskable": Count("pk", filter=unasked() & ~askable())} if counted else {}
    found = waits_after(after).aggregate(
        first=Min("pk", filter=unasked() & askable()), last=Max("pk"), **unaskable)
    return found["first"], found["last"], found.get("unaskable", 0)


def open_unasked(scope: Scope, now: datetime | None) -> Asked:
    """Open the requests of the waits in scope that have none, and the position for the
    next pass: up to the first wait that still has none and could have one (tried again
    next pass until its failure has lasted: approvals.open_failures), past those that can
    never be asked (reported here)."""
    after = None if scope.full else scope.asked_through
    first, last, unaskable = _waits_read(after)
    if unaskable:
        _report_unaskable(after)
    opened = 0
    if first is not None:
        opened = open_pending_requests(now=now, after=first - 1)
        # Those before the first were asked already: only the rest is read again.
        first, later, _ = _waits_read(first - 1, counted=False)
        last = max(last, later or 0)
    if first is not None:
        return Asked(opened, first - 1, unaskable)
    return Asked(opened, max(scope.asked_through, last or 0), unaskable)


# Waits named in one warning; the pass's report counts them all.
UNASKABLE_NAMED = 20


def _report_unaskable(after: int | None) -> None:
    waits = (waits_after(after).filter(unasked()).exclude(askable()).order_by("pk")
             .values_list("pk", "run_id", "step_name", "tool_call_id")[:UNASKABLE_NAMED])
    named = "; ".join(f"wait {pk}: run {run_id} step {step}"
                      + (f" tool call {call}" if call else "")
                      for pk, run_id, step, call in waits)
    logger.warning("approval waits that can never be asked (their step or tool call does "
                   "not wait for a person, or their run has no such step); passed over, "
                   "they go when their run stops waiting: %s", named)


def end_pass(scope: Scope, asked_through: int, given: datetime | None) -> None:
    """Keep the position the pass reached, and when a full look was made (by the
    database's clock, as of_pass judges it; `given`, a test's time, stands in): one write
    at most, none when neither changed."""
    now = store.time_in_statement(given)
    rows = []
    if asked_through != scope.asked_through:
        rows.append(PassPosition(job=ASKED_JOB, after_id=asked_through, updated_at=now))
    if scope.full:
        rows.append(PassPosition(job=FULL_LOOK_JOB, after_id=0, updated_at=now))
    if rows:
        PassPosition.objects.bulk_create(  # one upsert
            rows, update_conflicts=True, unique_fields=["job"],
            update_fields=["after_id", "updated_at"])
