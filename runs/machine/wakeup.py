"""Wake-up hints to the broker. A hint only says "look at this run now": losing one costs
latency (the sweeper finds the run), sending two costs nothing (the claim decides)."""

import logging
import uuid

from celery import current_app
from django.db import transaction
from kombu.exceptions import OperationalError

logger = logging.getLogger(__name__)

# The broker cannot be reached (kombu wraps the transport's connection errors so): an outage
# the sweeper covers, said in one line; anything else keeps its traceback.
BROKER_DOWN = (OperationalError, OSError)

ADVANCE_RUN_TASK = "runs.advance_run"  # runs.tasks.advance_run


_routes: dict[int, dict] = {}


def _publish(run_id: int, producer=None) -> None:
    """What send_task does for a hint, without what a hint never needs (a result to wait
    for, a parent task to trace, native delayed delivery): the message is made and published
    through a producer of the app's pool, on the route the router gives the task (asked
    once per app). Half the cost of send_task; the before/after_task_publish signals fire."""
    app = current_app._get_current_object()
    route = _routes.get(id(app))
    if route is None:
        route = _routes[id(app)] = app.amqp.router.route({}, ADVANCE_RUN_TASK, (), {})
    message = app.amqp.create_task_message(str(uuid.uuid4()), ADVANCE_RUN_TASK, (run_id,), {},
                                           **route)
    with app.producer_or_acquire(producer) as pooled:
        app.amqp.send_task_message(pooled, ADVANCE_RUN_TASK, message, **route)


def send_wakeup(run_id: int, *, countdown: float | None = None) -> bool:
    """Ask a worker to advance `run_id`. Never raises: a broker outage is not a failure."""
    try:
        # By name: the task module imports the executor, which imports the transitions,
        # which send hints; naming the task keeps that a line, not a circle.
        if countdown:
            current_app.send_task(ADVANCE_RUN_TASK, args=(run_id,), countdown=countdown)
        else:
            _publish(run_id)
        return True
    except Exception as exc:
        logger.warning("wake-up hint for run %s not sent (%s); the sweeper will pick it up",
                       run_id, exc, exc_info=not isinstance(exc, BROKER_DOWN))
        return False


def send_wakeups(run_ids: list[int]) -> int:
    """send_wakeup for many runs through one broker connection (a sweep that takes hundreds
    of runs back). Returns how many hints went out; never raises."""
    sent = 0
    if not run_ids:
        return sent
    try:
        with current_app.producer_or_acquire() as producer:
            for run_id in run_ids:
                _publish(run_id, producer)
                sent += 1
    except Exception as exc:
        logger.warning("%s of %s wake-up hints not sent (%s); the sweeper will pick them up",
                       len(run_ids) - sent, len(run_ids), exc,
                       exc_info=not isinstance(exc, BROKER_DOWN))
    return sent


def wake_after_commit(run_id: int, *, countdown: float | None = None) -> None:
    """Send a wake-up hint once the current transaction has committed."""
    transaction.on_commit(lambda: send_wakeup(run_id, countdown=countdown))


def wake_all_after_commit(run_ids: list[int]) -> None:
    """send_wakeups once the current transaction has committed."""
    if run_ids:
        transaction.on_commit(lambda: send_wakeups(run_ids))
