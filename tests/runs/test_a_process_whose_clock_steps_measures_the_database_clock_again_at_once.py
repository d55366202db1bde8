"""A process's estimate of the database's clock (runs.store's now(): its own clock
corrected by the offset it measured) is measured again as soon as its own clock steps (set
by hand, a virtual machine resumed), not up to REMEASURE_SECONDS later: meanwhile a lease, a
retry's backoff and the time a lookup's "not found" is trusted from would be stamped off by
the step, and a "not found" trusted an hour early can send again an effect a receiver that
ignores keys has already made. A clock that only runs on costs no query."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from runs import store

pytestmark = pytest.mark.django_db


def server_now():
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        return cursor.fetchone()[0]


def stepped(monkeypatch, by: timedelta) -> None:
    """This process's clock steps by `by` from now on (the monotonic clock does not)."""
    real = timezone.now
    monkeypatch.setattr(timezone, "now", lambda: real() + by)


@pytest.mark.parametrize("by", [timedelta(hours=-1), timedelta(minutes=10)],
                         ids=["back an hour", "ahead ten minutes"])
def test_after_the_step_the_estimate_is_the_database_clock_again(monkeypatch, by):
    estimate = store.current()
    estimate.measure_clock()
    stepped(monkeypatch, by)
    before = server_now()
    reading = estimate.now()
    after = server_now()
    assert before - timedelta(seconds=1) <= reading <= after + timedelta(seconds=1)


def test_a_clock_that_only_runs_on_costs_no_query():
    estimate = store.current()
    estimate.measure_clock()
    with CaptureQueriesContext(connection) as queries:
        for _ in range(50):
            estimate.now()
    assert len(queries) == 0, [q["sql"] for q in queries]
