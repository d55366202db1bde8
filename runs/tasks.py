"""Celery tasks: thin wrappers around the executor, the sweeper and start_run."""

import logging

from celery import shared_task
from django.db import DatabaseError, connection

from audit.chain import Actor

from .error_text import first_line
from .execution import executor, sweeper
from .execution.database_outage import (
    CONNECTION_LOST,
    beat_pass,
    connection_trouble_text,
    refuses_writes,
    refuses_writes_text,
    unreachable,
)
from .execution.lost_pool_process import AdvanceRunRequest
from .machine import limits, transitions
from .machine.errors import StartRefused
from .machine.wakeup import ADVANCE_RUN_TASK
from .models import RunStatus
from .waiting import kept, schedules

logger = logging.getLogger(__name__)


# A task whose database connection was lost (killed by the server, a restart, a failover) is
# tried again on a new one (console.celery drops the broken connection after the task).
# Trying again does nothing twice: every transition checks the run's state before it
# writes, so one that committed just before the connection went is not applied again, and a
# step whose outcome could not be recorded keeps its lease until it expires and is then
# settled by reconciliation by key, never sent again blindly.
RETRY = {"bind": True, "max_retries": 5, "default_retry_delay": 1}


# replaces_broken_connection: console.celery skips its "SELECT 1" before this task, which
# replaces a connection found dead at its first statement itself, at once. Its request, in
# the worker's main process, hands back the lease of a pool process that died under it.
@shared_task(name=ADVANCE_RUN_TASK, replaces_broken_connection=True,
             Request=AdvanceRunRequest, **RETRY)
def advance_run(self, run_id: int) -> str | None:
    try:
        try:
            status = executor.advance_run(run_id)
        except CONNECTION_LOST as exc:
            # Most often the session died while the worker waited (killed, a restart, a
            # failover): once more at once, on a new connection.
            logger.info("run %s: %s; trying again on a new connection", run_id,
                        connection_trouble_text(exc))
            connection.close()
            status = executor.advance_run(run_id)
            if status is None:
                # Its lease was not handed back (runs.execution.executor): another worker or
                # the sweeper has the run, or the database refused the hand-back.
                logger.warning("run %s: not taken up again on the new connection: it is held "
                               "by a lease (a step under way is settled by its key once the "
                               "lease runs out) or it is not due", run_id)
        # A slot under the workflow's limits may have freed: the runs it held back go next.
        limits.wake_after_release(run_id, status)
        if status == RunStatus.WAITING:
            # An event that came before the run began to wait for it is delivered now.
            kept.consume_kept_for_run(run_id)
        return status
    except CONNECTION_LOST as exc:
        if self.request.retries >= self.max_retries:
            # The wake-up hint is given up, not the run: it is still queued (or its lease
            # expires), and the sweeper's pass takes it up once the database answers (or the
            # session holding its row lets go).
            if unreachable(exc):
                logger.warning("run %s: the database could not be reached in %d tries (%s); "
                               "the sweeper takes the run up when it answers", run_id,
                               self.request.retries + 1, first_line(exc))
            else:
                logger.warning("run %s: %s, in %d tries; the sweeper takes the run up again",
                               run_id, connection_trouble_text(exc), self.request.retries + 1)
            connection.close()
            return None
        logger.warning("run %s: %s; trying again", run_id, connection_trouble_text(exc))
        raise self.retry(exc=exc) from exc
    except DatabaseError as exc:
        if not refuses_writes(exc):
            raise
        connection.close()  # a new session next time (database_outage.beat_pass says why)
        # Whatever this task had not committed was rolled back. A step whose call was made
        # keeps its intent and its lease: once writes are allowed again the sweeper takes the
        # lease back and the step is settled by its key, as after a worker's crash. Trying
        # again now would only be refused again.
        logger.warning("run %s: %s; the sweeper takes the run up again once it accepts them "
                       "(a step whose call was made is then settled by its key)", run_id,
                       refuses_writes_text(exc))
        return None


@shared_task(name="runs.sweep")
@beat_pass("runs.sweep")
def sweep() -> dict:
    report = sweeper.sweep()
    return report.__dict__


@shared_task(name="runs.fire_schedules")
@beat_pass("runs.fire_schedules")
def fire_schedules() -> dict:
    # As `schedules tick` says it: a result backend or the worker's log line of the result
    # shows which slot was refused and why.
    return schedules.fire_due_schedules().said(run_ids=False)


# A start event is the only record of the run it asks for until the run's row is written: while
# the database cannot take it (away, refusing writes, no connection free) the event is kept
# by trying again, each time a little later (at most START_RETRY_MAX_DELAY seconds apart:
# short of any broker's visibility timeout), for about START_RETRY_LIMIT tries, an hour,
# rather than the five seconds of RETRY after which it was dropped. Trying again starts
# nothing twice: a run is one per (workflow, business key).
START_RETRY_MAX_DELAY = 30
START_RETRY_LIMIT = 130


@shared_task(name="runs.start_run", bind=True, max_retries=START_RETRY_LIMIT)
def start_run(self, workflow: str, business_key: str, input: dict) -> dict:
    """Start a run from a queue event. Delivery is at least once: a redelivered event finds
    the run it started. A refused event is logged, not retried: retrying cannot fix it."""
    try:
        run, created = transitions.start_run(
            workflow=workflow, business_key=business_key, input=input,
            actor=Actor.system("queue-event"),
        )
    except StartRefused as exc:
        logger.error("start event refused: %s", exc)
        return {"refused": str(exc)}
    except DatabaseError as exc:
        if refuses_writes(exc):
            why = refuses_writes_text(exc)
            connection.close()  # a new session for the next try (as beat_pass)
        elif isinstance(exc, CONNECTION_LOST):
            why = connection_trouble_text(exc)
            connection.close()
        else:
            raise
        if self.request.retries >= self.max_retries:
            logger.error("start event for %s of %s given up after %d tries: %s; send it "
                         "again once the database takes it", business_key, workflow,
                         self.request.retries + 1, why)
            raise
        delay = min(START_RETRY_MAX_DELAY, 2 ** self.request.retries)
        logger.warning("start event for %s: %s; trying again in %d s", business_key, why,
                       delay)
        raise self.retry(exc=exc, countdown=delay) from exc
    return {"run_id": run.pk, "created": created}
