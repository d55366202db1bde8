"""A run row held by another session left idle in its transaction (a psql prompt, a stuck
script) held the whole approvals sweep: the pass waited on that run's lock at its first
part that touched it, and every later pass found the pass's lock taken and did nothing. No
other run's request was opened, reminded, timed out or applied, and no notification went
out, for as long as the other session kept the row. Now the sweep leaves a held run to the
next pass (approvals.requests.lock_run(skip_held=True)): the others go on, and once the
row is free the held run's due timeout is applied, once."""

import io
import threading
from datetime import timedelta

import pytest
from django.core import mail
from django.core.management import call_command
from django.db import connection

from approvals import schedule
from approvals.models import ApprovalRequest, Notification
from audit.models import AuditRecord
from runs.models import Run, RunStatus
from tests.approvals.conftest import open_request, waiting_run
from tests.approvals.run_lock_order import session

pytestmark = pytest.mark.django_db(transaction=True)


def sweep_in_a_thread() -> tuple[threading.Thread, list]:
    passed = []

    def work():
        try:
            passed.append(schedule.sweep())
        finally:
            connection.close()

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread, passed


def test_the_sweep_passes_over_a_held_run_and_applies_its_timeout_once_it_is_free(approvers):
    held = waiting_run()
    overdue = open_request(held)
    # Past its due time: the sweep times it out (rejects it, by the step's policy).
    ApprovalRequest.objects.filter(pk=overdue.pk).update(
        requested_at=overdue.requested_at - timedelta(days=6),
        due_at=overdue.requested_at - timedelta(days=5))
    others = [waiting_run(amount=200 + i) for i in range(2)]
    mail.outbox = []

    holder = session()
    try:
        holder.execute("SELECT id FROM runs_run WHERE id = %s FOR UPDATE", [held.pk])
        thread, passed = sweep_in_a_thread()
        # Without the fix the pass waits here for as long as the row is held.
        thread.join(timeout=120)
        assert not thread.is_alive(), "the sweep waited for the run another session holds"
        # Decided while the row was still held: the other runs were asked, and told.
        asked = ApprovalRequest.objects.filter(run__in=others, status="pending")
        assert asked.count() == 2
        assert Notification.objects.filter(request__in=asked, status="sent").count() == 4
        # Every notification queued went out (the held run's too: sending locks no run).
        assert not Notification.objects.exclude(status="sent").exists()
        assert len(mail.outbox) == Notification.objects.count() == 6
        # The held run's request was left as it was, for the next pass.
        overdue.refresh_from_db()
        assert overdue.status == "pending"
        assert passed[0].timed_out == 0
    finally:
        holder.rollback()
        holder.close()

    report = schedule.sweep()
    assert report.timed_out == 1
    overdue.refresh_from_db()
    assert overdue.status != "pending" and overdue.settled_at is not None
    assert Run.objects.get(pk=held.pk).status != RunStatus.WAITING
    # The system's decision (the timeout's), recorded once.
    decided = AuditRecord.objects.filter(run=held, action="approval_decided")
    assert decided.count() == 1 and decided.get().actor_kind == "system"
    assert schedule.sweep().timed_out == 0
    call_command("verify_audit", stdout=io.StringIO())
