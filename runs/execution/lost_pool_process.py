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

from ..definitions import definition
from ..definitions.registry import registry
from ..machine import transitions
from ..models import Run, RunStatus, Step, StepStatus
from .executor import worker_name
from .outages import first_line

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
    it (transitions.hand_back, done by this worker) and nothing it had sent may still land
    unmatched by a key (late_landing). Returns whether it was handed back."""
    dead = worker_name(pid)
    # The main process's session may have idled past its age or broken meanwhile.
    connection.close_if_unusable_or_obsolete()
    try:
        lease = transitions.lease_held_by(run_id, dead)
        if lease is not None and (landing := late_landing(run_id)) is not None:
            logger.warning("run %s: its pool process %s died (%s); its lease runs out "
                           "rather than being handed back at once: %s", run_id, dead, what,
                           landing)
            return False
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


def late_landing(run_id: int) -> str | None:
    """Why a call the dead process made may still reach its receiver after a lookup by key
    found nothing and sent it again, or None. A process killed mid-call leaves its request
    on the wire or in the receiver's hands: looked up at once, it may be found not done and
    sent again while the first is still being handled. A receiver that honours keys makes
    the two one; for any other (an undo, a tool call, a step not declared to honour its
    key), the lease's end gives the first time to land before anything is looked up, as
    after any crash."""
    run = Run.objects.filter(pk=run_id).only(
        "workflow_name", "workflow_version", "status").first()
    if run is None:
        return None
    if run.status == RunStatus.COMPENSATING:
        return "an undo may be in flight"
    running = list(Step.objects.filter(run_id=run_id, status=StepStatus.RUNNING)
                   .values_list("name", flat=True))
    workflow = registry.get(run.workflow_name, run.workflow_version)
    for name in running:
        spec = workflow.step(name) if workflow is not None else None
        if spec is None or spec.kind == definition.AGENT:
            return f"step {name} may have a call in flight"
        if spec.has_side_effect and not spec.honours_key:
            return f"step {name} changes another system and does not honour its key"
    return None
