"""An approval link is stamped by the sweep with the database's clock, and its age is judged
by the same clock when it is opened: a web host whose own clock is off neither kills a fresh
link nor keeps an old one alive."""

from datetime import timedelta
from urllib.parse import urlparse

import pytest

from approvals import requests, schedule
from approvals.models import ApprovalRequest
from runs import store
from tests.approvals.conftest import waiting_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def shift_database_clock(monkeypatch):
    """Moves the database's clock by the given amount from this (the web) host's."""
    measured = type(store.current()).now

    def shift(by: timedelta):
        monkeypatch.setattr(type(store.current()), "now", lambda db: measured(db) + by)
    return shift


def _emailed_link(mailoutbox) -> str:
    body = next(m for m in mailoutbox if m.to == ["ann@example.com"]).body
    return urlparse(next(line for line in body.splitlines()
                         if line.startswith("http://testserver/"))).path


@pytest.fixture
def link_by_the_sweep(pending, mailoutbox):
    assert schedule.sweep().sent == 2
    return _emailed_link(mailoutbox)


def test_a_fresh_link_opens_from_a_web_host_whose_clock_is_days_ahead(
        shift_database_clock, approvers, ann, client, mailoutbox, settings):
    shift_database_clock(-timedelta(seconds=settings.APPROVAL_LINK_MAX_AGE, days=1))
    # Opened as the sweep opens it, dated as its run is locked (approvals.timeouts.judged_at):
    # the shift is of this process's estimate, by which links alone are stamped and judged.
    run = waiting_run()
    assert requests.open_pending_requests() == 1
    pending = ApprovalRequest.objects.get(run=run, status="pending")
    assert schedule.sweep().sent == 2
    client.force_login(ann)
    response = client.get(_emailed_link(mailoutbox))
    assert response.status_code == 302
    assert response["Location"] == f"/approvals/{pending.pk}/"


def test_an_old_link_is_expired_on_a_web_host_whose_clock_is_days_behind(
        link_by_the_sweep, shift_database_clock, ann, client, settings):
    shift_database_clock(timedelta(seconds=settings.APPROVAL_LINK_MAX_AGE, hours=1))
    client.force_login(ann)
    response = client.get(link_by_the_sweep)
    assert response.status_code == 410 and response.context["check"] == "expired"
