"""A transaction id means one transaction only on the server that gave it, in that run of
it: after a failover, or a restart that lost a commit record not yet on disk, the server may
give the same id to another transaction. runs.execution.lost_commit keeps, with the id read
before a COMMIT, when that server started, and asks about the id only where the server
answering started then: elsewhere "it may have been done" (UNKNOWN), never another
transaction's "committed" or "aborted" told as this one's.

The transaction here is a real one, committed on the test database; what the door would
have kept of it is written as it keeps it (runs.execution.lost_commit.LostCommit)."""

import datetime

import pytest
from django.db import OperationalError

from runs.execution.lost_commit import (
    ATTRIBUTE,
    COMMITTED,
    NOT_COMMITTED,
    UNKNOWN,
    LostCommit,
    commit_outcome,
)
from tests.cancelled_statement import other_session

pytestmark = pytest.mark.django_db(transaction=True)


def _transaction(*, commit: bool) -> tuple[str, datetime.datetime]:
    with other_session(autocommit=False) as session:
        session.execute("CREATE TEMP TABLE t (x int)")
        xid, started = session.execute(
            "SELECT pg_current_xact_id_if_assigned()::text, pg_postmaster_start_time()"
        ).fetchone()
        session.commit() if commit else session.rollback()
    return xid, started


def _lost(xid, started) -> OperationalError:
    exc = OperationalError("consuming input failed: server closed the connection")
    setattr(exc, ATTRIBUTE, LostCommit(sent=True, xid=xid, backend_pid=0,
                                       server_started=started))
    return exc


def test_the_server_run_that_gave_the_id_answers_for_it():
    committed, started = _transaction(commit=True)
    rolled_back, _ = _transaction(commit=False)
    assert commit_outcome(_lost(committed, started)) == COMMITTED
    assert commit_outcome(_lost(rolled_back, started)) == NOT_COMMITTED


def test_a_server_started_at_another_time_cannot_tell():
    committed, started = _transaction(commit=True)
    rolled_back, _ = _transaction(commit=False)
    before = started - datetime.timedelta(minutes=5)
    assert commit_outcome(_lost(committed, before)) == UNKNOWN
    assert commit_outcome(_lost(rolled_back, before)) == UNKNOWN
