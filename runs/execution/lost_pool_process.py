"""A prefork pool process that died under runs.advance_run (SIGKILLed by the OOM killer or
an operator, cut at the worker's hard time limit) leaves the run it was advancing held by
its lease. The worker's main process learns of the death at once: Celery fails the task's
request there (WorkerLostError, and with acks_late and reject-on-worker-lost the message is
requeued without any task_failure signal). The request of runs.advance_run is therefore this
class, whose failure hands back the lease the dead process held on the run, through the
take-back of a lease whose holder is gone (transitions.hand_back): the step under way is
settled by its key by whoever claims the run next (the requeued message, the hint the
hand-back sends, the sweeper), never sent again blindly, and nobody waits for
RUNS_LEASE_SECONDS.

Only the dead process's lease is handed back: the one that carries its name (host:pid, the
pid Celery noted when the process accepted the task), with the token it has now, and only
while that token still holds the run.
"""

import logging

from billiard.einfo import ExceptionWithTraceback
from billiard.exceptions import Terminated, TimeLimitExceeded, WorkerLostError
from celery.worker.request import Request
from django.db import DatabaseError, connection
from kombu.asynchronous import get_event_loop

from ..error_text import first_line
from ..machine import transitions
from .executor import worker_name

logger = logging.getLogger(__name__)

# The process is gone when Celery says so (a SystemExit is billiard's report of a process
# ending, before it has quite ended: its call was cut, and whatever it still writes is
# fenced off by the token).
GONE = (WorkerLostError, Terminated, SystemExit, KeyboardInterrupt)


class AdvanceRunRequest(Request):
    """The request of runs.advance_run in the worker's main process."""

    def on_failure(self, exc_info, send_failed_event=True, return_ok=False):
        try:
            self._hand_back_if_lost(exc_info.exception)
        except Exception:  # the worker's own handling (requeue, events) must go on
            logger.exception("run %s: the lease of its dead pool process was not handed "
                             "back; it runs out instead", _run_id(self))
        return super().on_failure(exc_info, send_failed_event=send_failed_event,
                                  return_ok=return_ok)

    def _hand_back_if_lost(self, exc: BaseException) -> None:
        if isinstance(exc, ExceptionWithTraceback):
            exc = exc.exc
        run_id, pid = _run_id(self), self.worker_pid
        if run_id is None or not pid:
            return
        if isinstance(exc, TimeLimitExceeded):
            # Celery fails the request before it kills the process, which may still be in
            # its call: the lease is handed back on the event loop's next turn, once the
            # process was killed (billiard's on_hard_timeout kills it right after).
            loop = get_event_loop()
            if loop is not None:
                loop.call_soon(hand_back_of_lost_process, run_id, pid,
                               "killed at the worker's hard time limit")
                return
        elif not isinstance(exc, GONE):
            return  # the task failed in a process that lives on: its executor saw to it
        hand_back_of_lost_process(run_id, pid, first_line(exc))


def _run_id(request: Request) -> int | None:
    args, kwargs = request.args or (), request.kwargs or {}
    run_id = args[0] if args else kwargs.get("run_id")
    return run_id if isinstance(run_id, int) else None


def hand_back_of_lost_process(run_id: int, pid: int, what: str) -> bool:
    """Hand back the lease the dead pool process `pid` held on `run_id`, if it still holds
    it (transitions.hand_back, done by this worker). Returns whether it was handed back.

    A call the process had sent may still reach its receiver: what the next worker may do
    about it is the effect machine's one rule for every take-back (transitions.effects.
    settle), not this hand-back's: a receiver that ignores keys has its first "not found"
    trusted only `lookup_delay` seconds later, and nothing high-impact is sent again without
    a person."""
    dead = worker_name(pid)
    # The main process's session may have idled past its age or broken meanwhile.
    connection.close_if_unusable_or_obsolete()
    try:
        lease = transitions.lease_held_by(run_id, dead)
        handed = lease is not None and transitions.hand_back(
            lease, why=f"its pool process died ({what})", by=worker_name())
    except DatabaseError as exc:
        connection.close()
        logger.warning("run %s: the lease of its dead pool process %s was not handed back "
                       "(%s); it runs out instead", run_id, dead, first_line(exc))
        return False
    if handed:
        logger.warning("run %s: the lease of its pool process %s, which died (%s), is handed "
                       "back at once; a step under way is settled by its key before anything "
                       "is sent again", run_id, dead, what)
    return handed
