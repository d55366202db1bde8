"""The banner of a paused workflow names the workflow, who paused it and why, and on a run's
page which workflow the run belongs to: it is shown only for the workflows the person may
view, and never on a page the person was refused. It reads the pauses in one query on the
pages it may appear on, and none on a refused page."""

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from guardian.shortcuts import assign_perm

from runs.machine import dispatch
from runs.models import DispatchPause, Workflow
from tests.factories import SYSTEM, new_run

pytestmark = pytest.mark.django_db

ORDERS_BANNER = "Dispatch of <strong>test-orders</strong>"
ORDERS_REASON = "vendor outage INC-4711"
OTHER_BANNER = "Dispatch of <strong>test-two-systems</strong>"


@pytest.fixture(autouse=True)
def _fresh_pauses():
    dispatch.forget_cache()
    yield
    dispatch.forget_cache()


@pytest.fixture
def orders_run():
    """A run of test-orders, whose dispatch is paused, and test-two-systems paused too."""
    run = new_run()
    new_run("test-two-systems")
    dispatch.pause_dispatch(workflow="test-orders", actor=SYSTEM, reason=ORDERS_REASON)
    dispatch.pause_dispatch(workflow="test-two-systems", actor=SYSTEM, reason="INC-22")
    return run


@pytest.fixture
def other_viewer(db):
    """May view the runs of test-two-systems, and of no other workflow."""
    user = User.objects.create_user("wfop", password="pw")
    new_run("test-two-systems")
    assign_perm("runs.view_runs", user, Workflow.objects.get(name="test-two-systems"))
    return user


def _tells_nothing_of_orders(page: str) -> bool:
    return ORDERS_BANNER not in page and ORDERS_REASON not in page


def _pause_reads(queries) -> int:
    return sum(DispatchPause._meta.db_table in q["sql"] for q in queries)


def test_a_person_with_no_permission_sees_no_banner_on_the_pages_refused_to_them(
        client_for, orders_run):
    client = client_for(User.objects.create_user("nobody", password="pw"))
    for url in ("/schedules/", "/runs/?workflow=test-orders", f"/runs/{orders_run.pk}/",
                "/workflows/test-orders/"):
        response = client.get(url)
        assert response.status_code == 403, url
        page = response.content.decode()
        assert _tells_nothing_of_orders(page) and OTHER_BANNER not in page, url
        assert "test-orders" not in page, url


def test_a_person_sees_the_banners_of_the_workflows_they_may_view_only(
        client_for, orders_run, other_viewer):
    client = client_for(other_viewer)
    schedules = client.get("/schedules/")
    assert schedules.status_code == 200
    assert OTHER_BANNER in schedules.content.decode() and "INC-22" in schedules.content.decode()
    assert _tells_nothing_of_orders(schedules.content.decode())
    assert _tells_nothing_of_orders(client.get("/runs/?workflow=test-orders").content.decode())


def test_a_run_page_refused_does_not_tell_which_workflow_the_run_is(
        client_for, orders_run, other_viewer):
    response = client_for(other_viewer).get(f"/runs/{orders_run.pk}/")
    assert response.status_code in (403, 404)
    assert "test-orders" not in response.content.decode()


def test_a_refused_page_about_a_run_one_may_view_shows_no_banner_either(client_for, auditor,
                                                                        orders_run):
    client = client_for(auditor)
    url = f"/runs/{orders_run.pk}/investigation/"
    assert ORDERS_BANNER in client.get(url).content.decode()
    # Looking effects up needs the reconcile permission, which an auditor has not.
    refused = client.get(url, {"lookups": "1"})
    assert refused.status_code == 403
    assert _tells_nothing_of_orders(refused.content.decode())


def test_the_banner_reads_the_pauses_once_and_a_refused_page_not_at_all(
        client_for, orders_run, other_viewer):
    dispatch.pause_dispatch(workflow="test-scheduled", actor=SYSTEM, reason="freeze")
    client = client_for(other_viewer)
    with CaptureQueriesContext(connection) as shown:
        assert OTHER_BANNER in client.get("/schedules/").content.decode()
    assert _pause_reads(shown.captured_queries) == 1
    with CaptureQueriesContext(connection) as refused:
        assert client.get("/workflows/test-orders/").status_code == 403
    assert _pause_reads(refused.captured_queries) == 0
