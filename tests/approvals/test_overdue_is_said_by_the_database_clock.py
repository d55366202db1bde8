"""Whether a pending request is overdue is said on its page and in the inbox by the clock
its timeout is judged by: the database's (approvals.timeouts). The pages asked this web
host's own clock, so a host whose clock was behind offered a request as on time, with its
form, that the person's decision would then find timed out; one whose clock was ahead
marked "overdue" a request the sweep and a decision still took as on time."""

from datetime import timedelta

import pytest
from django.urls import reverse

from approvals.models import ApprovalRequest
from approvals.timeouts import clock
from runs import store
from tests.approvals.conftest import open_request, waiting_run

pytestmark = pytest.mark.django_db

OFF_BY = timedelta(hours=6)


@pytest.fixture
def shift_database_clock(monkeypatch):
    """Moves the database's clock by the given amount from this (the web) host's."""
    measured = type(store.current()).now

    def shift(by: timedelta):
        monkeypatch.setattr(type(store.current()), "now", lambda db: measured(db) + by)
    return shift


def _said_overdue(client, request) -> tuple[bool, bool]:
    page = client.get(reverse("approvals:detail", kwargs={"pk": request.pk}))
    inbox = client.get(reverse("approvals:inbox"))
    assert page.status_code == 200 and inbox.status_code == 200
    return "overdue" in page.content.decode(), "overdue" in inbox.content.decode()


def test_a_request_past_due_by_the_database_clock_is_said_overdue(
        shift_database_clock, approvers, ann, client):
    request = open_request(waiting_run(), clock())
    # Due an hour ago by the database's clock, in five hours by this host's.
    ApprovalRequest.objects.filter(pk=request.pk).update(due_at=clock() + OFF_BY
                                                         - timedelta(hours=1))
    shift_database_clock(OFF_BY)
    client.force_login(ann)
    assert _said_overdue(client, request) == (True, True)


def test_a_request_on_time_by_the_database_clock_is_not_said_overdue(
        shift_database_clock, approvers, ann, client):
    request = open_request(waiting_run(), clock())
    # Due in five hours by the database's clock, an hour ago by this host's.
    ApprovalRequest.objects.filter(pk=request.pk).update(due_at=clock() - timedelta(hours=1))
    shift_database_clock(-OFF_BY)
    client.force_login(ann)
    assert _said_overdue(client, request) == (False, False)
