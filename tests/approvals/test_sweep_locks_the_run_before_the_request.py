"""The approvals sweep's parts that change a request lock its run first, then the request,
as a person's decision does (approvals.decisions.decide): in the other order a reminder or a
withdrawal and a decision arriving at that moment each hold what the other waits for, and
PostgreSQL aborts one of them as a deadlock."""

import threading
import time

import psycopg
import pytest
from django.db import connection

from approvals import schedule
from approvals.models import ApprovalRequest
from runs.machine import transitions
from tests.approvals.conftest import later
from tests.factories import SYSTEM

pytestmark = pytest.mark.django_db(transaction=True)


def _session(*, autocommit: bool = False) -> psycopg.Connection:
    """A session of its own (standing in for a decision that holds the run's lock)."""
    s = connection.settings_dict
    return psycopg.connect(host=s["HOST"], port=s["PORT"] or 5432, user=s["USER"],
                           password=s["PASSWORD"] or None, dbname=s["NAME"],
                           autocommit=autocommit)


def _blocked_on_a_lock(timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    # Autocommit: inside a transaction pg_stat_activity keeps the view of its first read.
    with _session(autocommit=True) as probe:
        while time.monotonic() < deadline:
            waiting = probe.execute("SELECT count(*) FROM pg_stat_activity "
                                    "WHERE wait_event_type = 'Lock' AND datname = %s",
                                    [connection.settings_dict["NAME"]]).fetchone()[0]
            if waiting:
                return True
            time.sleep(0.05)
    return False


def _while_a_decision_holds_the_run(request: ApprovalRequest, sweep_part) -> None:
    """Run `sweep_part` in a thread while another session holds `request`'s run locked;
    once the part waits, the request must still be free: the part locks the run first."""
    decider = _session()
    decider.execute("SELECT id FROM runs_run WHERE id = %s FOR UPDATE", [request.run_id])
    done = []

    def part():
        try:
            done.append(sweep_part())
        finally:
            connection.close()

    thread = threading.Thread(target=part)
    thread.start()
    try:
        assert _blocked_on_a_lock(), "the sweep's part never waited for the run's lock"
        # The decision would now lock the request: it is free, nobody deadlocks.
        decider.execute("SELECT id FROM approvals_approvalrequest WHERE id = %s "
                        "FOR UPDATE NOWAIT", [request.pk])
    finally:
        decider.commit()
        decider.close()
        thread.join(timeout=30)
    assert done, "the sweep's part did not finish once the run was free"


def test_a_reminder_waits_for_the_run_before_it_locks_the_request(pending, t0):
    _while_a_decision_holds_the_run(
        pending, lambda: schedule.send_reminders(now=later(t0, hours=24)))
    pending.refresh_from_db()
    assert pending.reminder_count == 1


def test_a_withdrawal_waits_for_the_run_before_it_locks_the_request(pending, t0):
    # The run was terminated: its request can no longer be decided and is withdrawn.
    transitions.terminate(pending.run_id, actor=SYSTEM, reason="customer cancelled")
    _while_a_decision_holds_the_run(pending, lambda: schedule.withdraw_stale_requests())
    pending.refresh_from_db()
    assert pending.status == "withdrawn"
