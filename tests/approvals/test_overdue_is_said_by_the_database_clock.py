"""Whether a pending request is overdue is said on its page and in the inbox by the clock
its timeout is judged by: the database's, asked in the query, as the sweep and a decision
ask it (approvals.timeouts.judged_at). The pages asked this web host's estimate of that
clock (its own clock plus an offset measured every 30 s), which runs ahead or behind for a
while after the host's clock stepped: behind, a request was offered as on time, with its
form, that the person's decision would then find timed out; ahead, "overdue" was said of a
request the sweep and a decision still took as on time."""

from datetime import timedelta

import pytest
from django.db import connection
from django.urls import reverse

from approvals.models import ApprovalRequest
from approvals.timeouts import clock
from runs import store
from tests.approvals.conftest import open_request, waiting_run

pytestmark = pytest.mark.django_db

OFF_BY = timedelta(hours=6)


@pytest.fixture
def estimate_off_by(monkeypatch):
    """Puts this (the web) host's estimate of the database's clock off by the given amount,
    as for a while after the host's clock stepped."""
    measured = type(store.current()).now

    def shift(by: timedelta):
        monkeypatch.setattr(type(store.current()), "now", lambda db: measured(db) + by)
    return shift


def _database_now():
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        return cursor.fetchone()[0]


def _said_overdue(client, request) -> tuple[bool, bool]:
    page = client.get(reverse("approvals:detail", kwargs={"pk": request.pk}))
    inbox = client.get(reverse("approvals:inbox"))
    assert page.status_code == 200 and inbox.status_code == 200
    return "overdue" in page.content.decode(), "overdue" in inbox.content.decode()


def test_a_request_past_due_by_the_database_clock_is_said_overdue(
        estimate_off_by, approvers, ann, client):
    request = open_request(waiting_run(), clock())
    # Due an hour ago by the database's clock; in five hours by an estimate six hours behind.
    ApprovalRequest.objects.filter(pk=request.pk).update(
        due_at=_database_now() - timedelta(hours=1))
    estimate_off_by(-OFF_BY)
    client.force_login(ann)
    assert _said_overdue(client, request) == (True, True)


def test_a_request_on_time_by_the_database_clock_is_not_said_overdue(
        estimate_off_by, approvers, ann, client):
    request = open_request(waiting_run(), clock())
    # Due in an hour by the database's clock; five hours ago by an estimate six hours ahead.
    ApprovalRequest.objects.filter(pk=request.pk).update(
        due_at=_database_now() + timedelta(hours=1))
    estimate_off_by(OFF_BY)
    client.force_login(ann)
    assert _said_overdue(client, request) == (False, False)
