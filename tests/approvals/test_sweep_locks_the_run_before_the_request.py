"""The approvals sweep's parts that change a request lock its run first, then the request,
as a person's decision does (approvals.decisions.decide): in the other order a reminder or a
withdrawal and a decision arriving at that moment each hold what the other waits for, and
PostgreSQL aborts one of them as a deadlock. While the run is held they leave it, the
request untouched, to the next pass. (Opening a tool call's request, which may supersede
another, is in test_tool_call_requests.)"""

import pytest

from approvals import schedule
from runs.machine import transitions
from tests.approvals.conftest import later
from tests.approvals.run_lock_order import while_a_decision_holds_the_run
from tests.factories import SYSTEM

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_reminder_leaves_a_held_run_and_never_locks_its_request_first(pending, t0):
    while_a_decision_holds_the_run(pending.run_id, pending.pk,
                                   lambda: schedule.send_reminders(now=later(t0, hours=24)))
    pending.refresh_from_db()
    assert pending.reminder_count == 1


def test_a_withdrawal_leaves_a_held_run_and_never_locks_its_request_first(pending, t0):
    # The run was terminated: its request can no longer be decided and is withdrawn.
    transitions.terminate(pending.run_id, actor=SYSTEM, reason="customer cancelled")
    while_a_decision_holds_the_run(pending.run_id, pending.pk,
                                   lambda: schedule.withdraw_stale_requests())
    pending.refresh_from_db()
    assert pending.status == "withdrawn"
