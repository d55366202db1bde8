"""A write joined to the next transition's transaction (runs.store.join_next_transaction:
a busy worker's registry beat) that met a database session ended under it (killed by
pg_terminate_backend, a server restart, a failover) was logged as a WARNING with a full
traceback, where the heartbeat and the tasks say the same in one line. It is one line now,
naming what was not written and what happens next; a joined write that fails for a reason
of its own keeps its traceback."""

import logging

import pytest
from django.db import DatabaseError, connection

from runs import store
from runs.execution.executor import worker_name
from runs.machine import transitions
from runs.reads.workers import JOINED_BEAT, Heartbeat
from runs.worker_models import Worker
from tests.cancelled_statement import end_this_session
from tests.factories import new_run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def nothing_joined():
    yield
    store.withdraw_joined(JOINED_BEAT)


def said(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "runs.store.base"]


def test_a_joined_beat_on_a_session_ended_under_it_is_said_in_one_line(caplog):
    run = new_run()
    heartbeat = Heartbeat()
    heartbeat(force=True)
    before = Worker.objects.get(name=worker_name()).heartbeat_at
    heartbeat.last -= 3600
    heartbeat.after_task()  # a due beat joins the next claim's transaction
    end_this_session()

    with caplog.at_level(logging.WARNING), pytest.raises(DatabaseError):
        transitions.claim_run(run.pk, worker=worker_name())
    [line] = said(caplog)
    assert line.levelname == "WARNING" and line.exc_info is None, line.exc_info
    assert line.getMessage().startswith(
        f"a write joined to a transition's transaction ({JOINED_BEAT}) was not written: "
        "the database session ended (terminating connection due to administrator command); "
        "the transition fails with it, and its writer joins it again to a later one"), \
        line.getMessage()

    # The task's handler starts a new session; the writer's next beat rides along a claim.
    connection.close()
    assert Worker.objects.get(name=worker_name()).heartbeat_at == before
    heartbeat.last -= 3600
    heartbeat.after_task()
    assert transitions.claim_run(new_run().pk, worker=worker_name()) is not None
    assert Worker.objects.get(name=worker_name()).heartbeat_at > before


def test_a_joined_write_that_fails_on_a_working_session_keeps_its_traceback(caplog):
    def broken():
        with connection.cursor() as cursor:
            cursor.execute("SELECT * FROM no_such_table")

    store.join_next_transaction("broken", broken)
    with caplog.at_level(logging.WARNING):
        assert transitions.claim_run(new_run().pk, worker=worker_name()) is not None
    [line] = said(caplog)
    assert line.getMessage() == "a write joined to a transition's transaction failed"
    assert line.exc_info is not None
