"""Celery tasks: a thin wrapper around the approvals sweep (scheduled by console.celery)."""

from celery import shared_task

from . import schedule


@shared_task(name="approvals.sweep")
def sweep() -> dict:
    return schedule.sweep().as_dict()
