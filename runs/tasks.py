"""Celery tasks: thin wrappers around the executor, the sweeper and start_run."""

import logging

from celery import shared_task

from audit.chain import Actor

from . import executor, sweeper, transitions
from .errors import StartRefused
from .wakeup import ADVANCE_RUN_TASK

logger = logging.getLogger(__name__)


@shared_task(name=ADVANCE_RUN_TASK)
def advance_run(run_id: int) -> str | None:
    return executor.advance_run(run_id)


@shared_task(name="runs.sweep")
def sweep() -> dict:
    report = sweeper.sweep()
    return report.__dict__


@shared_task(name="runs.start_run")
def start_run(workflow: str, business_key: str, input: dict) -> dict:
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
    return {"run_id": run.pk, "created": created}
