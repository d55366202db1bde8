"""A console page drawn on a web host whose clock runs ten minutes ahead of the database's
tells time by the database's clock, which stamped what it shows: the runs list's "N new" bar
counts a run that changed after the page was drawn (not only those changing ten minutes
later); a run's lease beaten just now was beaten "0 minutes ago", not ten; so was a change
on the attention list, and an approval request asked just now."""

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import User

from approvals import requests
from approvals.models import ApprovalRequest
from runs import store
from runs.machine import transitions
from runs.models import RunStatus
from tests.approvals.conftest import waiting_run
from tests.factories import SYSTEM, new_run, place
from tests.processes import manage

AHEAD = timedelta(minutes=10)
DRAW = ("import os; from django.test import Client; "
        "from django.contrib.auth.models import User; "
        "client = Client(HTTP_HOST='localhost'); "
        "client.force_login(User.objects.get(username='op')); "
        "response = client.get(os.environ['PAGE'], secure=True); "
        "print('STATUS', response.status_code); print(response.content.decode())")


@pytest.fixture
def op(db):
    return User.objects.create_superuser("op", password="pw")


@pytest.mark.django_db(transaction=True)
def test_a_run_changed_after_the_runs_list_was_drawn_is_counted_new(client, op):
    shown = new_run()
    # Drawn in a web process of its own, its clock ten minutes ahead.
    process = manage("shell", "-c", DRAW, PAGE="/runs/",
                     RUNS_TEST_CLOCK_OFFSET_SECONDS=AHEAD.total_seconds())
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    assert "STATUS 200" in out
    drawn_at = re.search(r"new_since=([^&\"]+)", out).group(1)
    changed = new_run()
    transitions.terminate(changed.pk, actor=SYSTEM, reason="a change after the page")
    client.force_login(op)
    bar = client.get(f"/runs/?new_since={drawn_at}&shown={shown.pk}",
                     HTTP_HX_REQUEST="true").content.decode()
    assert "1 new" in bar


@pytest.fixture
def database_clock_behind(monkeypatch):
    """This (the web) host's clock runs AHEAD of the database's: what the database stamps
    now is, by this host's own clock, ten minutes old."""
    measured = type(store.current()).now
    monkeypatch.setattr(type(store.current()), "now", lambda db: measured(db) - AHEAD)
    return store.current().now


def _ages(html: str) -> list[str]:
    return re.findall(r"(\d+\xa0minutes?)", html)


@pytest.mark.django_db
def test_a_lease_beaten_just_now_was_beaten_zero_minutes_ago(database_clock_behind, client,
                                                            op):
    run = new_run()
    assert transitions.claim_run(run.pk, worker="host-a:1",
                                 now=database_clock_behind()) is not None
    client.force_login(op)
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert "last heartbeat 0\xa0minutes ago" in html
    assert "10\xa0minutes" not in html


@pytest.mark.django_db
def test_the_attention_list_tells_a_change_just_made_as_made_zero_minutes_ago(
        database_clock_behind, client, op):
    run = place(new_run(), status=RunStatus.ATTENTION, updated_at=database_clock_behind())
    client.force_login(op)
    html = client.get("/attention/").content.decode()
    assert f"/runs/{run.pk}/" in html
    assert _ages(html) == ["0\xa0minutes"]


@pytest.mark.django_db
def test_an_approval_request_asked_just_now_was_asked_zero_minutes_ago(
        database_clock_behind, client, op):
    run = waiting_run()
    assert requests.open_pending_requests(now=database_clock_behind()) == 1
    approval = ApprovalRequest.objects.get(run=run, status="pending")
    client.force_login(op)
    html = client.get(f"/approvals/{approval.pk}/").content.decode()
    assert "0\xa0minutes ago" in html
    assert _ages(html) == ["0\xa0minutes"]
