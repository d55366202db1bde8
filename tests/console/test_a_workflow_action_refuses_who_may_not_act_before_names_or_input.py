"""Pausing or resuming a workflow's dispatch, or a schedule, checks the permission first, as
`act` does for a run: whoever may not pause a workflow is answered 403 whether it (or its
schedule) exists or not, so that names cannot be probed, and whatever the input (a reason
the database cannot store, no `paused` field): no message, nothing changed. 403 for both,
not 404 for both: the refusal is true of every name (they may pause none), while a 404
would have to hide the workflow pages they may see. Whoever may pause every workflow is
told that one does not exist (404)."""

import pytest
from django.contrib.auth.models import User
from django.contrib.messages import get_messages
from django.urls import reverse
from guardian.shortcuts import assign_perm

from runs.machine import dispatch
from runs.models import ControlRecord, DispatchPause, ScheduleState, Workflow
from tests.factories import new_run

pytestmark = pytest.mark.django_db

DISPATCH = [("test-orders",), ("no-such-flow",), ("test-orders\x00",)]
SCHEDULES = [("test-scheduled", "every-minute"), ("test-scheduled", "never"),
             ("no-such-flow", "every-minute")]
BODIES = [{"paused": "1", "reason": "incident"}, {"paused": "0", "reason": "fixed"},
          {"paused": "1", "reason": "r\x00"}, {"reason": "incident"},
          {"paused": "1", "reason": "r", "system": "ledger\x00"}]


@pytest.fixture(autouse=True)
def _fresh_pauses():
    dispatch.forget_cache()
    yield
    dispatch.forget_cache()


def _changed():
    return (DispatchPause.objects.exists() or ControlRecord.objects.exists()
            or ScheduleState.objects.filter(paused=True).exists())


def _post(client, args, data):
    name = "console:dispatch_pause" if len(args) == 1 else "console:schedule_pause"
    return client.post(reverse(name, args=args), data)


@pytest.fixture
def orders_only(db):
    """May pause test-orders and no other workflow (an object permission on its row)."""
    new_run()
    user = User.objects.create_user("ord", password="pw")
    assign_perm(f"runs.{dispatch.PERMISSION}", user, Workflow.objects.get(name="test-orders"))
    return user


@pytest.mark.parametrize("data", BODIES)
@pytest.mark.parametrize("args", DISPATCH + SCHEDULES)
def test_who_may_not_pause_is_refused_alike_for_every_name_and_input(client_for, auditor,
                                                                     args, data):
    response = _post(client_for(auditor), args, data)
    assert response.status_code == 403
    assert list(get_messages(response.wsgi_request)) == []
    assert not _changed()


@pytest.mark.parametrize("args", [("test-saga",), ("no-such-flow",), ("test-orders\x00",),
                                  ("test-scheduled", "every-minute"),
                                  ("test-scheduled", "never")])
def test_who_may_pause_one_workflow_is_refused_alike_for_others_known_or_not(
        client_for, orders_only, args):
    response = _post(client_for(orders_only), args, {"paused": "1", "reason": "incident"})
    assert response.status_code == 403
    assert not _changed()
    # Their own workflow they pause.
    done = _post(client_for(orders_only), ("test-orders",), {"paused": "1", "reason": "INC-1"})
    assert done.status_code == 302
    assert DispatchPause.objects.get().workflow_name == "test-orders"


@pytest.mark.parametrize("args", [("no-such-flow",), ("test-orders\x00",),
                                  ("test-scheduled", "never"), ("no-such-flow", "every-minute")])
def test_who_may_pause_every_workflow_is_told_a_name_does_not_exist(client_for, operator,
                                                                    args):
    response = _post(client_for(operator), args, {"paused": "1", "reason": "incident"})
    assert response.status_code == 404
    assert not _changed()


def test_who_may_pause_hears_of_the_input_after_the_permission(client_for, operator):
    response = _post(client_for(operator), ("test-orders",), {"paused": "1", "reason": "r\x00"})
    assert response.status_code == 302
    assert [m.message for m in get_messages(response.wsgi_request)] == [
        "Nothing was changed: reason: NUL characters cannot be stored."]
    assert not _changed()
