"""A start event (the runs.start_run task a queue producer sends) is the only record of its
run until the run's row is written. Delivered while the database refuses writes (read-only:
a failover, a DBA's default_transaction_read_only) for longer than a few seconds, it was
tried five times a second apart and dropped: the run was never started, and nobody was told
which. It is now tried again, each time later, until the database takes it: one run, started
once writes are allowed again (a real worker whose every session is refused writes)."""

import time

import pytest
from celery import current_app
from django.db import connection

from runs.models import Run
from tests.processes import start_worker, stop, wait_for

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("empty_broker")]
READ_ONLY_FOR = 10  # seconds: longer than the five tries a second apart the event had


def _read_only(on: bool) -> None:
    name = connection.settings_dict["NAME"]
    with connection.cursor() as cursor:
        if on:
            cursor.execute(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
        else:
            cursor.execute(f'ALTER DATABASE "{name}" RESET default_transaction_read_only')


def test_a_start_event_outlasting_a_read_only_spell_starts_its_run_once(tmp_path):
    # A new session for each task: each try meets the database's setting of the moment.
    worker = start_worker("starts", tmp_path, DB_CONN_MAX_AGE=0, VAR_DIR=tmp_path)
    try:
        _read_only(True)
        try:
            current_app.send_task("runs.start_run",
                                  args=["test-orders", "event-1", {"order": "event-1"}])
            log = tmp_path / "starts.log"
            wait_for(lambda: "start event for event-1: the database refuses writes" in
                     log.read_text(), timeout=60, what="the worker to meet the refusal")
            time.sleep(READ_ONLY_FOR)
            assert not Run.objects.filter(business_key="event-1").exists()
        finally:
            _read_only(False)
        wait_for(lambda: Run.objects.filter(business_key="event-1").exists(), timeout=90,
                 interval=0.3, what="the event's run to be started")
        assert worker.poll() is None
    finally:
        stop(worker)
    assert Run.objects.filter(workflow_name="test-orders", business_key="event-1").count() == 1
    said = log.read_text()
    assert "given up" not in said and "Traceback" not in said
