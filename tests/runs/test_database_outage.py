"""A beat pass that cannot reach the database says so once and waits for the next tick; a
pass whose statement fails on a connection that still works fails as before (a deadlock or
a statement timeout is the pass's own error, not an outage)."""

import logging

import pytest
from django.db import connection
from django.db.utils import OperationalError

from runs.execution.database_outage import UNREACHABLE, beat_pass
from runs.execution.outages import outages

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def no_outage_remembered():
    outages.failed.clear()
    yield
    outages.failed.clear()


def _lose_the_session():
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")


def test_a_pass_that_cannot_reach_the_database_says_so_once_then_once_when_it_answers(caplog):
    lost = {"times": 2}

    @beat_pass("test.pass")
    def a_pass():
        if lost["times"]:
            lost["times"] -= 1
            _lose_the_session()
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return {"done": 1}

    with caplog.at_level(logging.WARNING, logger="runs.execution.database_outage"):
        assert a_pass() == UNREACHABLE
        assert a_pass() == UNREACHABLE
        assert a_pass() == {"done": 1}
        assert a_pass() == {"done": 1}
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2
    assert said[0].startswith("test.pass: the database cannot be reached (")
    assert said[1] == ("test.pass: the database answers again, after 2 pass(es) that could "
                       "not reach it")


def test_a_statement_that_fails_on_a_working_connection_is_the_passs_own_error(caplog):
    @beat_pass("test.pass")
    def a_pass():
        with connection.cursor() as cursor:
            cursor.execute("SET statement_timeout = 1")
            try:
                cursor.execute("SELECT pg_sleep(1)")
            finally:
                cursor.execute("RESET statement_timeout")

    with caplog.at_level(logging.WARNING, logger="runs.execution.database_outage"), \
            pytest.raises(OperationalError, match="statement timeout"):
        a_pass()
    assert not caplog.records
    assert outages.failed == {}
    with connection.cursor() as cursor:  # the connection the pass used still works
        cursor.execute("SELECT 1")
