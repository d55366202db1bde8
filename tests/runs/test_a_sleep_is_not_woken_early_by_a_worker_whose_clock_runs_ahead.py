"""A sleep until a time is judged by the database's clock: a worker whose clock runs ahead
of it, or whose estimate of it does (its own clock stepped forward since it last measured
the server's), puts the run to sleep until that time instead of going on early. A time the
server's clock has passed still goes on at once."""

from datetime import datetime, timedelta

import pytest
from django.db import connection

from audit.actions import AuditAction
from audit.models import AuditRecord
from runs import store
from runs.definitions.definition import Workflow, registry
from runs.execution import executor
from runs.models import Run, RunStatus, StepStatus
from tests.factories import new_run, step
from tests.processes import start_worker, stop, until_status
from tests.workflows import OrderIn

AHEAD = timedelta(seconds=90)
# Declared for the worker processes by tests.runs.sleep_until_given_workflow (not imported
# here: it would stay registered for every later test).
NAME = "test-sleep-until-given"


@pytest.fixture
def sleeps_until_given():
    """The workflow of tests.runs.sleep_until_given_workflow, declared in this process."""
    flow = Workflow(NAME, version=1, input=OrderIn)
    flow.sleep("nap", until=lambda data: datetime.fromisoformat(data["order"]))
    yield flow
    registry.unregister(flow)


@pytest.fixture
def estimate_ahead(monkeypatch):
    """This process's estimate of the database's clock is 90 s ahead of it."""
    measured = type(store.current()).now
    monkeypatch.setattr(type(store.current()), "now", lambda db: measured(db) + AHEAD)


def server_now() -> datetime:
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        return cursor.fetchone()[0]


def sleeping_until(run: Run, until: datetime) -> None:
    run = Run.objects.get(pk=run.pk)
    nap = step(run, "nap")
    assert (run.status, run.next_wake_at) == (RunStatus.WAITING, until)
    assert (nap.status, nap.next_attempt_at) == (StepStatus.WAITING, until)
    assert not AuditRecord.objects.filter(run=run, action=AuditAction.TIMER_FIRED).exists()
    assert AuditRecord.objects.filter(run=run, action=AuditAction.TIMER_STARTED).count() == 1


@pytest.mark.django_db
@pytest.mark.usefixtures("sleeps_until_given", "estimate_ahead")
def test_a_worker_whose_estimate_of_the_clock_runs_ahead_sleeps_until_the_time():
    until = server_now() + AHEAD / 2
    run = new_run(NAME, order=until.isoformat())
    assert executor.advance_run(run.pk, worker="ahead") == RunStatus.WAITING
    sleeping_until(run, until)


@pytest.mark.django_db
@pytest.mark.usefixtures("sleeps_until_given", "estimate_ahead")
def test_a_time_the_servers_clock_has_passed_goes_on_at_once_whatever_the_estimate():
    run = new_run(NAME, order=(server_now() - timedelta(seconds=1)).isoformat())
    assert executor.advance_run(run.pk, worker="ahead") == RunStatus.COMPLETED
    assert step(run, "nap").status == StepStatus.SUCCEEDED


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("sleeps_until_given", "empty_broker")
def test_a_worker_process_whose_clock_runs_an_hour_ahead_sleeps_until_the_time(tmp_path):
    until = server_now() + timedelta(minutes=30)
    worker = start_worker("ahead", tmp_path, RUNS_TEST_CLOCK_OFFSET_SECONDS=3600,
                          RUNS_EXTRA_WORKFLOW_MODULES="tests.workflows,"
                                                      "tests.runs.sleep_until_given_workflow")
    try:
        run = new_run(NAME, order=until.isoformat())
        until_status(run, RunStatus.WAITING, RunStatus.COMPLETED, RunStatus.ATTENTION)
    finally:
        stop(worker)
    sleeping_until(run, until)
