"""A worker whose statement the database would not wait for (the run's row held by another
session past the role's lock_timeout, a statement_timeout) or rolled back (a serialization
failure, a deadlock) tries again, as before, but its log said "database connection lost" and,
after its five tries, ended in Celery's traceback: whoever read it looked at the network,
not at the session holding the row. It now says what the database said, in one line each,
and once the row is let go the run completes by the sweeper (a real worker whose sessions
wait 200 ms at most for a lock; the holder is a real session)."""

import psycopg
import pytest
from django.db import connection

from audit.chain import Actor
from runs.machine.transitions import start_run
from runs.machine.wakeup import send_wakeup
from runs.models import RunStatus
from tests.processes import child_env, start_worker, stop, until_status, wait_for

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("empty_broker")]


def other_session() -> psycopg.Connection:
    params = connection.settings_dict
    return psycopg.connect(dbname=params["NAME"], user=params["USER"] or None,
                           host=params["HOST"] or None, port=params["PORT"] or None)


def test_a_worker_kept_from_a_held_row_says_the_database_would_not_wait(tmp_path):
    url = child_env()["DATABASE_URL"] + "?options=-c%20lock_timeout%3D200"
    run, _ = start_run(workflow="test-orders", business_key="held", input={"order": "held"},
                       actor=Actor.system("lock-test"), wake=False)
    holder = other_session()
    worker = start_worker("held", tmp_path, DATABASE_URL=url, VAR_DIR=tmp_path,
                          RUNS_REQUEUE_AFTER_SECONDS=1)
    log = tmp_path / "held.log"
    try:
        holder.execute("SELECT id FROM runs_run WHERE id = %s FOR UPDATE", [run.pk])
        send_wakeup(run.pk)
        # Held past the worker's five tries a second apart: it gives the wake-up up.
        wait_for(lambda: "the sweeper takes the run up again" in log.read_text(),
                 timeout=60, what="the worker to give the wake-up up")
        holder.rollback()
        assert until_status(run, RunStatus.COMPLETED, timeout=90).status == RunStatus.COMPLETED
    finally:
        holder.close()
        stop(worker)
    said = log.read_text()
    assert f"run {run.pk}: the database would not wait (canceling statement due to lock " \
           "timeout)" in said
    assert "database connection lost" not in said
    assert "Traceback" not in said and "raised unexpected" not in said
