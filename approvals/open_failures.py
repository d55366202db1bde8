"""A wait whose request fails to open for a reason nobody can tell from a passing one (a
database error of the request's own rows, a bug in the approvals or notification code):
tried again at every pass, as a passing failure should be, but not for ever.

A failure that never ends would hold the sweep's position below its wait (every pass reads
every wait after it again), log a traceback at every pass, and leave its run waiting with
nobody asked. So each wait counts its failures in a row (runs.ApprovalWait.open_failures,
failing_since). The first is logged with its traceback and the next ones in a line; once a
wait has failed HELD_AFTER_FAILURES times over at least HELD_AFTER, its run is held for a
person, as a wait no request can be made for is (requests: approval_unaskable), saying the
error. Resumed, the run waits again with a new wait row, and is tried afresh.

A failure of the connection itself is not counted here: it stops the batch
(requests.stop_on_lost_connection), and says nothing about the wait it met.
"""

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import DatabaseError, transaction
from django.db.models import F, Q
from django.db.models.functions import Coalesce

from runs import store
from runs.models import ApprovalWait

logger = logging.getLogger(__name__)

# Both must hold: a few passes in a row (a deploy or a restart of a neighbour passes) and
# long enough that a fast sweep does not hold a run for a failure of seconds.
HELD_AFTER_FAILURES = 5
HELD_AFTER = timedelta(minutes=2)


@dataclass(frozen=True)
class Failing:
    # Failures in a row, this one included.
    failures: int
    # When the first of them happened.
    since: datetime
    # When this one was counted.
    at: datetime

    def lasted(self) -> bool:
        """Whether the failure has lasted long enough to hold the run for a person."""
        return self.failures >= HELD_AFTER_FAILURES and self.at - self.since >= HELD_AFTER


def count_failure(*, run_id: int, step_name: str, tool_call_id: int | None,
                  now: datetime | None = None) -> Failing | None:
    """Count one more failure to open the request of the wait that names `step_name` of
    run `run_id` (or tool call `tool_call_id`), in a transaction of its own: the one that
    failed rolled back. None when the wait is gone meanwhile (its run stopped waiting), or
    when the count itself failed (logged; the pass goes on). Dated by the database's clock
    in its statements, as requests are (`now`, a caller's time, a test's, stands in)."""
    counted = ApprovalWait.objects.filter(_wait(run_id, step_name, tool_call_id))
    clock = store.time_in_statement(now)
    try:
        with transaction.atomic():
            if not counted.update(open_failures=F("open_failures") + 1,
                                  failing_since=Coalesce(F("failing_since"), clock)):
                return None
            failures, since, at = counted.values_list("open_failures", "failing_since",
                                                      clock).get()
    except (DatabaseError, ApprovalWait.DoesNotExist):
        # Not counted (the database failed again, or the wait went meanwhile): the pass
        # goes on with the other waits, and this one is tried next pass as before.
        logger.warning("approval wait of run %s step %s: its failure could not be counted",
                       run_id, step_name, exc_info=True)
        return None
    return Failing(failures, since, at)


def cleared(*, run_id: int, step_name: str, tool_call_id: int | None) -> None:
    """The wait's request opened: a later failure (its request closed while the run still
    waits) starts a new count."""
    ApprovalWait.objects.filter(_wait(run_id, step_name, tool_call_id),
                                open_failures__gt=0).update(open_failures=0,
                                                            failing_since=None)


def _wait(run_id: int, step_name: str, tool_call_id: int | None) -> Q:
    if tool_call_id is not None:
        return Q(tool_call_id=tool_call_id)
    return Q(run_id=run_id, step_name=step_name, tool_call__isnull=True)


def described(exc: BaseException, failing: Failing) -> str:
    """Why the run is held, for its status message and audit record (the text is redacted
    there): the error's kind and its first line, with how long it has failed."""
    first = (str(exc).strip().splitlines() or [""])[0][:200]
    return (f"the request failed to open {failing.failures} times in a row since "
            f"{failing.since:%Y-%m-%d %H:%M:%S} UTC ({type(exc).__name__}: {first}); the "
            f"worker's log has the first failure's traceback")


def log_failure(exc: BaseException, failing: Failing | None, what: str) -> None:
    """The first failure in a row with its traceback, each later one in a line."""
    if failing is None or failing.failures == 1:
        logger.exception("approval request for %s not opened; will retry", what)
        return
    logger.warning("approval request for %s not opened again (%d times in a row since %s: "
                   "%s); will retry, and hold the run for a person after %d times over %s",
                   what, failing.failures, failing.since.isoformat(), type(exc).__name__,
                   HELD_AFTER_FAILURES, HELD_AFTER)
