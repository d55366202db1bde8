"""An approval request is dated by the database's clock where its row is written, the clock
its timeout is judged by: not this process's estimate of that clock (its own clock plus an
offset measured every 30 s, which runs ahead or behind for a while after its clock stepped).
The sweep on a host whose estimate is off opens a request asked at the database's time, due
and reminded from it, and its notifications are queued and sent by it; a reminder comes
when the database's clock reaches it, neither early nor late, and the next one is set from
the time it was sent by that clock. A request withdrawn because an operator ended its run is
dated the same way, and so is a four-eyes request (test_a_four_eyes_request_is_dated_by_the_
database_clock.py)."""

from datetime import timedelta

import pytest
from django.db import connection

from approvals import schedule
from approvals.models import ApprovalRequest, Notification, RequestStatus
from approvals.operator_actions import act
from audit.models import AuditRecord
from runs import store
from runs.operator.actions import ActionInput
from tests.approvals.conftest import waiting_run

pytestmark = pytest.mark.django_db

# Far more than the 30 s the estimate can be off by: a time taken from it cannot pass for
# the database's.
OFF = timedelta(hours=1)


def _server_now():
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        return cursor.fetchone()[0]


def _estimate_off_by(monkeypatch, offset: timedelta) -> None:
    """This process's estimate of the database's clock is `offset` off it."""
    measured = type(store.current()).now
    monkeypatch.setattr(type(store.current()), "now", lambda db: measured(db) + offset)


@pytest.fixture(params=[OFF, -OFF], ids=["estimate-ahead", "estimate-behind"])
def estimate_off(request, monkeypatch):
    _estimate_off_by(monkeypatch, request.param)
    return request.param


def _record(run_id, action) -> AuditRecord:
    (record,) = AuditRecord.objects.filter(run_id=run_id, action=action)
    return record


def test_the_sweep_opens_a_request_asked_due_and_reminded_from_the_database_clock(
        approvers, estimate_off, mailoutbox):
    run = waiting_run()

    before = _server_now()
    report = schedule.sweep()
    after = _server_now()

    assert report.opened == 1
    request = ApprovalRequest.objects.get(run=run, status=RequestStatus.PENDING)
    assert before <= request.requested_at <= after
    assert request.due_at == request.requested_at + timedelta(days=3)
    assert request.next_reminder_at == request.requested_at + timedelta(hours=24)
    assert _record(run.pk, "approval_opened").created_at == request.requested_at
    # Queued at the time the request was asked, and sent in the same pass, by the same
    # clock: an estimate behind it would have found them not due yet.
    notes = list(Notification.objects.filter(request=request))
    assert {n.recipient for n in notes} == {"ann@example.com", "bob@example.com"}
    assert {(n.created_at, n.status) for n in notes} == {(request.requested_at, "sent")}
    assert all(before <= n.sent_at <= after for n in notes)
    assert report.sent == 2 and len(mailoutbox) == 2


def test_a_reminder_comes_when_the_database_clock_reaches_it_and_sets_the_next_from_it(
        pending, estimate_off, mailoutbox):
    schedule.sweep()  # sends the request's own notifications
    mailoutbox.clear()
    # Due in ten minutes by the database's clock: an estimate an hour ahead finds it due.
    ApprovalRequest.objects.filter(pk=pending.pk).update(
        next_reminder_at=_server_now() + timedelta(minutes=10))

    report = schedule.sweep()

    assert report.reminded == 0 and mailoutbox == []
    assert ApprovalRequest.objects.get(pk=pending.pk).reminder_count == 0
    assert not AuditRecord.objects.filter(run_id=pending.run_id,
                                          action="approval_reminded").exists()

    # Due a second ago by the database's clock: an estimate an hour behind finds it not due.
    ApprovalRequest.objects.filter(pk=pending.pk).update(
        next_reminder_at=_server_now() - timedelta(seconds=1))
    before = _server_now()
    report = schedule.sweep()
    after = _server_now()

    assert report.reminded == 1
    pending.refresh_from_db()
    assert pending.reminder_count == 1
    reminded = _record(pending.run_id, "approval_reminded").created_at
    assert before <= reminded <= after
    assert pending.next_reminder_at == reminded + timedelta(hours=24)
    notes = list(Notification.objects.filter(request=pending, kind="reminder"))
    assert {(n.created_at, n.status) for n in notes} == {(reminded, "sent")}
    assert sorted(m.to[0] for m in mailoutbox) == ["ann@example.com", "bob@example.com"]
    assert all(m.subject.startswith("Reminder: ") for m in mailoutbox)


def test_a_request_an_operator_ends_the_run_of_is_withdrawn_at_the_database_clocks_time(
        pending, estimate_off, operators):
    olga, _ = operators

    before = _server_now()
    act("terminate", pending.run_id, user=olga, given=ActionInput(reason="duplicate"))
    after = _server_now()

    pending.refresh_from_db()
    assert pending.status == RequestStatus.WITHDRAWN
    assert before <= pending.settled_at <= after
    assert _record(pending.run_id, "approval_withdrawn").created_at == pending.settled_at
