"""The worker registry's beats cost a busy worker no commit: after a task a due beat rides
along the process's next claim, in that claim's transaction; the timer writes one itself
only when none came; the prefork worker beats only for its processes that went quiet."""

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from runs import store
from runs.execution.executor import worker_name
from runs.machine import transitions
from runs.reads.workers import Heartbeat
from runs.worker_models import Worker
from tests.factories import new_run

pytestmark = pytest.mark.django_db(transaction=True)


def xmin(table: str, key: str, value) -> int:
    """The id of the transaction that last wrote the row."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT xmin::text::bigint FROM {table} WHERE {key} = %s", [value])
        return cursor.fetchone()[0]


def registered(name: str, *, beaten_ago: timedelta) -> Worker:
    at = timezone.now() - beaten_ago
    return Worker.objects.create(name=name, host="h", pid=1, started_at=at, heartbeat_at=at)


@pytest.fixture(autouse=True)
def nothing_joined():
    yield
    store.withdraw_joined("worker-registry-beat")


def test_a_busy_workers_beat_is_written_in_its_next_claims_transaction():
    me = registered(worker_name(), beaten_ago=timedelta(minutes=1))
    run = new_run()
    heartbeat = Heartbeat(queues="celery")

    heartbeat.after_task()
    assert Worker.objects.get(pk=me.pk).heartbeat_at == me.heartbeat_at  # nothing yet

    assert transitions.claim_run(run.pk, worker=worker_name()) is not None
    beaten = Worker.objects.get(pk=me.pk)
    assert beaten.heartbeat_at > me.heartbeat_at and beaten.queues == "celery"
    written = xmin("runs_worker", "name", me.name)

    # Within the same half interval, the next task's claim carries no beat.
    heartbeat.after_task()
    transitions.claim_run(new_run().pk, worker=worker_name())
    assert xmin("runs_worker", "name", me.name) == written


def test_a_joined_beat_is_part_of_the_transition_and_rolls_back_with_it():
    me = registered(worker_name(), beaten_ago=timedelta(minutes=1))
    Heartbeat().after_task()
    with pytest.raises(RuntimeError), store.current().transaction():
        raise RuntimeError("the transition failed")
    assert Worker.objects.get(pk=me.pk).heartbeat_at == me.heartbeat_at  # never alone


def test_an_idle_workers_timer_writes_the_beat_itself_and_it_is_not_written_twice():
    me = registered(worker_name(), beaten_ago=timedelta(minutes=1))
    heartbeat = Heartbeat()
    heartbeat.after_task()  # joined; then no transition comes
    heartbeat.last -= 3600  # an interval and more has passed

    heartbeat()
    written = xmin("runs_worker", "name", me.name)
    assert Worker.objects.get(pk=me.pk).heartbeat_at > me.heartbeat_at

    transitions.claim_run(new_run().pk, worker=worker_name())
    assert xmin("runs_worker", "name", me.name) == written  # the joined beat was taken back


def test_the_prefork_worker_beats_only_for_its_processes_that_went_quiet():
    busy = registered("host:101", beaten_ago=timedelta(seconds=1))
    quiet = registered("host:102", beaten_ago=timedelta(minutes=1))
    busy_written = xmin("runs_worker", "name", busy.name)

    Heartbeat(queues="celery")(["host:101", "host:102", "host:103"])

    assert Worker.objects.get(pk=busy.pk).heartbeat_at == busy.heartbeat_at
    assert xmin("runs_worker", "name", busy.name) == busy_written  # not even rewritten
    assert Worker.objects.get(pk=quiet.pk).heartbeat_at > quiet.heartbeat_at
    new = Worker.objects.get(name="host:103")  # a new pool process: registered
    assert new.pid == 103 and new.queues == "celery"


def test_a_beat_whose_session_was_ended_under_it_says_so_in_one_line_and_beats_again(caplog):
    """A worker's session killed (pg_terminate_backend, a restart, a failover) while it is
    idle: its timer's next beat fails on the dead session. That was logged as "worker
    heartbeat failed" with a traceback at every such beat; it is one line saying what
    happened, and the beat after it goes through on a new session."""
    me = registered(worker_name(), beaten_ago=timedelta(minutes=5))
    heartbeat = Heartbeat()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        [pid] = cursor.fetchone()
    killer = connection.copy()
    try:
        with killer.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s, 5000)", [pid])
    finally:
        killer.close()

    with caplog.at_level("WARNING", logger="runs.reads.workers"):
        heartbeat()
    [said] = [r for r in caplog.records if r.name == "runs.reads.workers"]
    assert said.levelname == "WARNING" and said.exc_info is None, said.exc_info
    assert said.getMessage().startswith("worker heartbeat: the database session ended (")
    assert Worker.objects.get(pk=me.pk).heartbeat_at == me.heartbeat_at  # not written then

    heartbeat.last -= 3600
    heartbeat()
    assert Worker.objects.get(pk=me.pk).heartbeat_at > me.heartbeat_at
