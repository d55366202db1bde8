"""The console's form to pause or resume a workflow's dispatch, or a schedule, says which
with its one `paused` field. Sent twice (paused=1&paused=0, a form put together by a script
or a proxy that repeated the field), it asks for neither: refused with the message that
names the field, nothing paused or resumed, rather than the last value alone deciding and
resuming what an operator paused for an incident."""

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.contrib.messages import get_messages
from django.urls import reverse

from approvals.operator_actions import act_on_workflow
from console.roles import ensure_roles
from runs.machine import dispatch
from runs.models import ControlRecord, DispatchPause, ScheduleState

pytestmark = pytest.mark.django_db
REFUSAL = "Nothing was changed: paused: the form must say 1 (pause) or 0 (resume)."


@pytest.fixture
def olga(client):
    dispatch.forget_cache()
    ensure_roles(Group, Permission)
    user = User.objects.create_user("olga", password="pw")
    user.groups.add(Group.objects.get(name="operators"))
    client.force_login(user)
    yield user
    dispatch.forget_cache()


def _state():
    return (list(DispatchPause.objects.values_list("workflow_name", "system", "reason")),
            list(ScheduleState.objects.filter(paused=True).values_list("name", flat=True)),
            ControlRecord.objects.count())


def _messages(response):
    return [(m.level_tag, m.message) for m in get_messages(response.wsgi_request)]


@pytest.mark.parametrize("sent", [["1", "0"], ["0", "1"], ["0", "0"]])
def test_a_paused_dispatch_stays_paused(client, olga, sent):
    act_on_workflow("pause_dispatch", "test-orders", user=olga, reason="INC-9 ledger")
    before = _state()
    response = client.post(reverse("console:dispatch_pause", args=["test-orders"]),
                           {"paused": sent, "reason": "incident"})
    assert response.status_code == 302
    assert _messages(response) == [("error", REFUSAL)]
    assert _state() == before


@pytest.mark.parametrize("sent", [["1", "0"], ["0", "1"], ["0", "0"]])
def test_a_paused_schedule_stays_paused(client, olga, sent):
    act_on_workflow("pause_schedule", "test-scheduled", schedule="every-minute", user=olga,
                    reason="month-end freeze")
    before = _state()
    assert before[1] == ["every-minute"]
    response = client.post(
        reverse("console:schedule_pause", args=["test-scheduled", "every-minute"]),
        {"paused": sent, "reason": "incident"})
    assert _messages(response) == [("error", REFUSAL)]
    assert _state() == before


def test_once_it_still_pauses(client, olga):
    client.post(reverse("console:dispatch_pause", args=["test-orders"]),
                {"paused": "1", "reason": "INC-9 ledger"})
    assert _state()[0] == [("test-orders", "", "INC-9 ledger")]
