"""The beat job: one archiving pass (archive.archiving) per ARCHIVE_INTERVAL_SECONDS."""

import socket

from celery import shared_task

from runs.execution.database_outage import beat_pass

from . import archiving


@shared_task(name="archive.archive_runs")
@beat_pass("archive.archive_runs")
def archive_runs() -> dict:
    return archiving.archive_runs(actor=f"beat task on {socket.gethostname()}").as_dict()
