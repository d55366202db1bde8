"""A real Celery worker keeps its database session across tasks, and checks it before each
task: one session advances many runs, and when the server kills every session of the worker
(pg_terminate_backend) in the middle of a soak, the worker replaces them and every run still
finishes with each external effect made once."""

import uuid
from collections import Counter

import pytest
from django.core.management import call_command
from django.db import connection

from audit.chain import Actor
from demo.sandbox.models import Customer, Message, PaymentUpdate
from runs.execution import sweeper
from runs.machine.transitions import start_run
from runs.models import Run, RunStatus, Step, StepStatus
from tests.processes import start_worker, stop, wait_for

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("empty_broker")]
LEASE = 2
STARTER = Actor.system("connection-test")


@pytest.fixture
def application_name():
    """The worker's sessions carry this name in pg_stat_activity (libpq reads PGAPPNAME)."""
    return f"test-worker-{uuid.uuid4().hex[:12]}"


def _query(sql, *params):
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _sessions_opened() -> int:
    """Sessions ever opened on the test database, as the server counts them."""
    _query("SELECT pg_stat_clear_snapshot()")
    return _query("SELECT sessions FROM pg_stat_database WHERE datname = current_database()")[0][0]


def _backends(application_name) -> set[int]:
    return {pid for (pid,) in _query(
        "SELECT pid FROM pg_stat_activity WHERE application_name = %s", application_name)}


def _kill(application_name) -> int:
    return len(_query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                      "WHERE application_name = %s", application_name))


def _completed(runs) -> int:
    return Run.objects.filter(pk__in=[r.pk for r in runs], status=RunStatus.COMPLETED).count()


def _stop_and_count_sessions(worker, application_name, before) -> int:
    stop(worker)
    wait_for(lambda: not _backends(application_name), timeout=10, what="the worker's sessions "
             "to end")
    # A backend reports its session to the statistics by the time it has exited.
    return _sessions_opened() - before


def test_one_worker_advances_fifty_runs_on_one_database_session(tmp_path, application_name):
    before = _sessions_opened()
    worker = start_worker("reuse", tmp_path, PGAPPNAME=application_name)
    seen: set[int] = set()
    try:
        runs = [start_run(workflow="test-orders", business_key=f"reuse-{i}",
                          input={"order": f"o-{i}"}, actor=STARTER)[0] for i in range(50)]

        def all_done():
            seen.update(_backends(application_name))
            return _completed(runs) == len(runs)

        wait_for(all_done, timeout=120, interval=0.02, what="50 runs to complete")
    finally:
        opened = _stop_and_count_sessions(worker, application_name, before)
    print(f"\n50 runs through one worker: {opened} database session(s) opened, "
          f"{len(seen)} seen in pg_stat_activity")
    # Closing the connections around each task (Celery's default) opens one per task: 50+.
    assert len(seen) == 1
    assert opened <= 2  # the worker's session, and at most one opened while it started


def test_sessions_killed_mid_soak_are_replaced_and_no_effect_happens_twice(
        tmp_path, application_name, live_sandbox):
    worker = start_worker("soak", tmp_path, PGAPPNAME=application_name,
                          RUNS_LEASE_SECONDS=LEASE)
    killed, seen = [], set()

    def done(share):
        seen.update(_backends(application_name))
        return _completed(runs) >= share * len(runs)

    try:
        runs = [start_run(workflow="customer-onboarding", business_key=f"soak:{i}",
                          input={"email": f"c{i}@example.com", "name": f"C{i}", "plan": "pro"},
                          actor=STARTER)[0] for i in range(40)]
        for share in (0.25, 0.6):
            wait_for(lambda share=share: done(share) and _backends(application_name),
                     timeout=120, interval=0.02, what=f"{share:.0%} of the runs to complete")
            killed.append(_kill(application_name))

        def all_done():
            sweeper.sweep()  # beat's job: expired leases, due retries, lost wake-ups
            return done(1)

        wait_for(all_done, timeout=180, interval=0.1, what="every run to complete")
        assert worker.poll() is None, "the worker died with its connection"
    finally:
        stop(worker)
    # The live server's sessions (it serves the sandbox) are counted by the server too, so
    # the worker's are told apart by their name, sampled while the soak ran.
    print(f"\n40 runs, every worker session killed twice ({killed} killed): "
          f"{len(seen)} worker session(s) seen")
    assert killed == [1, 1]
    # One before each kill and one after: replaced, not reopened per task (forty runs of
    # several steps would show dozens). At most two more: the session the worker may open
    # while it starts, as the test above allows (a sample can catch it before it closes),
    # and the heartbeat thread's own (runs.machine.heartbeats), opened once a call outlasts
    # a beat, as calls do on a loaded host (seen once in CI: five).
    assert 3 <= len(seen) <= 5

    # Every effect once: customers and payment updates are unique per key at the receiver,
    # but the messenger keeps every message it is sent.
    assert Customer.objects.count() == PaymentUpdate.objects.count() == len(runs)
    messages = Counter(Message.objects.values_list("client_reference", flat=True))
    assert len(messages) == len(runs) and set(messages.values()) == {1}
    steps = Step.objects.filter(run__in=runs)
    assert set(steps.values_list("status", flat=True)) == {StepStatus.SUCCEEDED}
    for s in steps:
        assert s.remote_ref, f"{s.run_id}/{s.name} succeeded without its remote reference"
    call_command("verify_audit")
