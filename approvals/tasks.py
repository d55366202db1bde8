"""Celery tasks: a thin wrapper around the approvals sweep (scheduled by console.celery)."""

from celery import shared_task

from . import services


@shared_task(name="approvals.sweep")
def sweep() -> dict:
    return services.sweep().as_dict()
