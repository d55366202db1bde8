"""A worker whose database session is ended while a step's call is under way (a DBA's
pg_terminate_backend, idle_session_timeout, a pooler or a failover cutting it) cannot record
the outcome on it. Its task tries again on a new connection, as before; but its claim found
the run still held by its own lease and returned nothing, without a word, and the run waited
for that lease to run out (30 s by default) before the sweeper took it back. Now the worker
hands its lease back at once on the new connection (as the sweeper would take it back: the
step under way becomes unknown), takes the run up again and settles the step by its key, so
the call is never sent twice; said in one line. A real worker, a real receiver that honours
keys, and a lease far longer than the test waits."""

import pytest
from django.db import connection

from audit.actions import AuditAction
from audit.chain import Actor
from audit.models import AuditRecord
from runs.bench_receiver import SlowReceiver
from runs.machine.transitions import start_run
from runs.models import Run, RunStatus, Step
from tests.processes import start_worker, stop, wait_for

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("empty_broker")]


def _end_other_sessions() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                       "WHERE datname = current_database() AND pid <> pg_backend_pid()")
        return cursor.fetchone()[0]


def test_a_step_whose_workers_session_ends_mid_call_is_settled_by_key_without_waiting_for_its_lease(
        tmp_path):
    with SlowReceiver(delay=2) as receiver:
        worker = start_worker("killed", tmp_path, VAR_DIR=tmp_path, RUNS_LEASE_SECONDS=300)
        try:
            run = start_run(workflow="test-two-remote-calls", business_key="killed",
                            input={"n": 1, "url": receiver.url},
                            actor=Actor.system("session-test"))[0]
            wait_for(lambda: receiver.held, timeout=60, interval=0.05,
                     what="the first call to reach the receiver")
            assert _end_other_sessions() >= 1
            # No sweep here, and the lease outlasts the wait: only the worker takes it up.
            wait_for(lambda: Run.objects.get(pk=run.pk).status == RunStatus.COMPLETED,
                     timeout=60, interval=0.2, what="the run to complete by its worker")
        finally:
            stop(worker)
        assert sorted(receiver.posts.values()) == [1, 1]

    first = Step.objects.get(run=run, name="first-call")
    assert (first.status, first.attempt) == ("succeeded", 1)
    assert first.remote_ref == receiver.effects[first.idempotency_key]
    actions = list(AuditRecord.objects.filter(run_id=run.pk).order_by("seq")
                   .values_list("action", flat=True))
    assert actions.count(AuditAction.LEASE_EXPIRED) == 1  # handed back, once
    assert AuditAction.RECONCILED in actions  # found by its key, not sent again
    said = (tmp_path / "killed.log").read_text()
    assert said.count(f"run {run.pk}: its lease is handed back") == 1
    assert "Traceback" not in said and "raised unexpected" not in said
