"""The database stays up but refuses every write (a failover that lands the workers on a
demoted primary or a standby, a DBA's default_transaction_read_only): a real worker and a
real beat meet it while a step's call is under way. The worker says in one line per run, and
each beat pass once, that the database refuses writes (no traceback at every tick: Celery's
default for a task that raises); once writes are allowed again the run goes on by beat's
passes alone (each process dropped the session that was refused: one opened while the
database was read-only stays so after the setting is reset, and after a failover a new one
may reach the new primary), the call made during the refusal is settled by its key, and no
effect reaches the receiver twice (a receiver that honours keys, runs.bench_receiver)."""

import time

import pytest
from django.db import connection

from audit.chain import Actor
from runs.bench_receiver import SlowReceiver
from runs.machine.transitions import start_run
from runs.models import Run, RunStatus, Step
from tests.processes import start_worker, stop, wait_for
from tests.runs.test_periodic_passes_across_a_database_outage import PASSES, start_beat

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("empty_broker")]
CALL_SECONDS = 3  # the receiver holds each call this long (the effect is made as it arrives)
# Persistent sessions (production's default): the ones opened while the database refused
# writes keep refusing after its setting is reset, unless the worker drops them.
CHILDREN = {**PASSES, "RUNS_LEASE_SECONDS": 6}


def _start(key: str, receiver) -> Run:
    return start_run(workflow="test-two-remote-calls", business_key=key,
                     input={"n": 1, "url": receiver.url},
                     actor=Actor.system("read-only-test"))[0]


def _read_only(on: bool) -> None:
    name = connection.settings_dict["NAME"]
    with connection.cursor() as cursor:
        if on:
            cursor.execute(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
        else:
            cursor.execute(f'ALTER DATABASE "{name}" RESET default_transaction_read_only')


def _end_other_sessions() -> None:
    """As a failover does: every other session of the test database ends; the next ones
    find the database as it is now."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                       "WHERE datname = current_database() AND pid <> pg_backend_pid()")


def test_a_step_mid_call_when_the_database_turns_read_only_is_settled_by_key_once_it_allows_writes(
        tmp_path):
    env = {"VAR_DIR": tmp_path, **CHILDREN}
    with SlowReceiver(delay=CALL_SECONDS) as receiver:
        worker = start_worker("read-only", tmp_path, **env)
        beat = start_beat(tmp_path, **env)
        try:
            run = _start("mid-call", receiver)
            wait_for(lambda: receiver.held, timeout=60, interval=0.05,
                     what="the first call to reach the receiver")
            try:
                _read_only(True)
                _end_other_sessions()
                # Started by a session opened before (this test's): its wake-up reaches a
                # worker whose every new session is refused writes.
                woken = _start("woken", receiver)
                log = tmp_path / "read-only.log"
                wait_for(lambda: f"run {woken.pk}: the database refuses writes" in
                         log.read_text(), timeout=60, what="the worker to say so")
                time.sleep(4)  # beat's passes meet it at several ticks
                assert Run.objects.get(pk=run.pk).status == RunStatus.RUNNING
                assert Run.objects.get(pk=woken.pk).status == RunStatus.QUEUED
            finally:
                _read_only(False)
            wait_for(lambda: Run.objects.filter(pk__in=[run.pk, woken.pk],
                                                status=RunStatus.COMPLETED).count() == 2,
                     timeout=120, interval=0.2, what="the runs to complete by beat's passes")
            assert worker.poll() is None and beat.poll() is None
        finally:
            stop(beat)
            stop(worker)
        # Each call reached the receiver once: the one under way when writes were refused
        # was looked up by its key, not sent again, and its effect is the step's evidence.
        assert sorted(receiver.posts.values()) == [1, 1, 1, 1]
        first = Step.objects.get(run=run, name="first-call")
        assert first.remote_ref == receiver.effects[first.idempotency_key]
        assert first.attempt == 1

    said = log.read_text()
    assert "Traceback" not in said and "raised unexpected" not in said
    assert said.count(f"run {woken.pk}: the database refuses writes") == 1
    for name in ("runs.sweep", "api.publish_webhooks"):
        assert said.count(f"{name}: the database refuses writes") == 1, name
        assert said.count(f"{name}: a pass went through again") == 1, name
