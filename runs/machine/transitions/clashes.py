"""A lease holder's checkpoint that the database rolled back for its clash with another session
(a serialization failure, a deadlock, a row held past lock_timeout: runs.store.clashed) is
written again at once, from the rows as the database holds them.

The worker holds what it came to write (an effect's outcome, a lookup's verdict on it, an
undo's outcome, a model's answer) only in memory: nothing of it was written, and leaving it
there made the run wait for its lease to run out, then settled the effect by its key, or
asked the model again (a paid call, whose answer may differ). Every kind of effect the one
machine works (runs.machine.transitions.effects) goes through here: a step's
(lease_cycle.record_outcome, with the next step's intent, unknown_outcome.settle_unknown)
and every lease holder's transition of an agent step (agent_turns: the model's turn stored,
a budget spent, a cancel read; agent_calls: a tool call's intent, outcome and lookup's
verdict, calls taken back, a call no rule can work; agent_compensation: an undo's intent and
outcome), each by one try of its transition on `step`, the step that holds the effect (a
tool call's row is read again inside its try). Writing it again is safe only from fresh
rows: a failed attempt has changed the lease's rows in memory (a step marked done, the next
one's intent begun), and applying the transition to them again would write that twice or
skip a step. The effect itself is never called again here, nor the model: only the
checkpoint is written again.
"""

import logging
import random
import time
from collections.abc import Callable
from typing import TypeVar

from django.db import OperationalError

from ... import store
from ...error_text import first_line
from ...models import Step
from .kernel import Lease

logger = logging.getLogger(__name__)

# Tries of one checkpoint in all. A clash clears as the other transaction ends: at once for a
# serialization failure or a deadlock, within the holder's transaction for a held row.
TRIES = 5
FIRST_PAUSE_SECONDS = 0.05

Written = TypeVar("Written")


def written_again_on_clash(lease: Lease, step: Step, what: str,
                           write: Callable[[Step], Written]) -> Written:
    """`write(step)` (a transition of the lease holder on `step`), applied again to the rows as
    the database holds them when the database rolled it back for a clash (runs.store.clashed),
    up to TRIES times in all; past that, or on any other error, the error goes up as it was.
    Returns what `write` returns (the lease, or the row an intent recorded). `what` names the
    checkpoint in the log ("the outcome of step X"). After a try again the caller's `step`
    is not the lease's row any more: it goes on with lease.by_name(step.name)."""
    kept = (lease.work.name if lease.work is not None else None, lease.settle_first,
            lease.compensating, lease.finished)
    for tried in range(1, TRIES + 1):
        try:
            return write(step)
        except OperationalError as exc:
            if not store.clashed(exc) or tried == TRIES:
                raise
            logger.warning("run %s: the database rolled back %s (%s): it clashed with another "
                           "session's; written again from the rows as the database holds them "
                           "(try %d of %d)", lease.run.pk, what, first_line(exc), tried + 1,
                           TRIES)
        # Jittered, so that two sessions that clashed do not meet again at once.
        time.sleep(FIRST_PAUSE_SECONDS * 2 ** (tried - 1) * (1 + random.random()))
        step = as_the_database_holds_them(lease, step.name, kept)
    raise AssertionError("unreachable")  # the last try returns or raises


def as_the_database_holds_them(lease: Lease, name: str, kept: tuple) -> Step:
    """The lease's run and step rows read again, and its work as it was before the attempt
    that was rolled back; returns the step named `name` among the new rows."""
    run, steps = store.current().read_run_and_steps(lease.run.pk)
    lease.run, lease.steps = run, steps
    work, lease.settle_first, lease.compensating, lease.finished = kept
    lease.work = lease.by_name(work) if work is not None else None
    return lease.by_name(name)
