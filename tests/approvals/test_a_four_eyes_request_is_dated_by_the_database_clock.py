"""A four-eyes request is dated by the database's clock as its run is locked, the clock its
timeout and reminders are judged by (approvals.timeouts): an operator asking from a web
server whose own clock, or whose estimate of the database's, is off must not open a request
that the sweep finds long overdue, or one that it reminds and times out days late."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.db import connection

from approvals import four_eyes, schedule
from approvals.models import ApprovalRequest, RequestStatus
from console.roles import ensure_roles
from runs import store
from runs.execution import executor
from runs.models import RunStatus
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db

OFF_BY = timedelta(days=2)


@pytest.fixture(autouse=True)
def roles(db):
    ensure_roles(Group, Permission)


@pytest.fixture
def estimate_behind(monkeypatch):
    """This process's estimate of the database's clock two days behind it (a web server
    whose clock stepped back, until the offset is measured again): longer than a four-eyes
    request's timeout."""
    measured = type(store.current()).now
    monkeypatch.setattr(type(store.current()), "now", lambda db: measured(db) - OFF_BY)


def _server_now():
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        return cursor.fetchone()[0]


def _operator(name):
    user = User.objects.create_user(name, email=f"{name}@example.com", password="pw")
    user.groups.add(Group.objects.get_or_create(name="operators")[0])
    return user


@pytest.mark.usefixtures("estimate_behind")
def test_a_request_asked_from_a_host_whose_clock_is_behind_is_not_timed_out_at_once(
        script, settings):
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    run = place(run, status=RunStatus.ATTENTION)
    olga, _omar = _operator("olga"), _operator("omar")

    before = _server_now()
    request, created = four_eyes.request_operator_action(
        run, action="terminate", requested_by=olga, reason="duplicate order")
    after = _server_now()

    assert created
    assert before <= request.requested_at <= after
    assert request.due_at == request.requested_at + timedelta(
        seconds=settings.APPROVALS_FOUR_EYES_TIMEOUT_SECONDS)
    assert request.next_reminder_at == request.requested_at + timedelta(
        seconds=settings.APPROVALS_FOUR_EYES_REMIND_SECONDS)
    report = schedule.sweep()
    assert report.timed_out == 0 and report.reminded == 0
    assert ApprovalRequest.objects.get(pk=request.pk).status == RequestStatus.PENDING
