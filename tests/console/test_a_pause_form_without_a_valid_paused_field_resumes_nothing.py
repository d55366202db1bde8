"""A form to pause or resume a workflow's dispatch, or a schedule, says which with its
`paused` field (1 pause, 0 resume). Without it, or with any other value, it is refused with a
message naming the field, and nothing is paused or resumed: a form that lost the field must
not resume what an operator paused for an incident."""

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from approvals.operator_actions import act_on_workflow
from runs.machine import dispatch
from runs.models import ControlRecord, DispatchPause, ScheduleState

pytestmark = pytest.mark.django_db

NOT_PAUSED = [{}, {"paused": ""}, {"paused": "yes"}, {"paused": "true"}, {"paused": "01"}]
REFUSAL = "Nothing was changed: paused: the form must say 1 (pause) or 0 (resume)."


@pytest.fixture(autouse=True)
def _fresh_pauses():
    dispatch.forget_cache()
    yield
    dispatch.forget_cache()


def _messages(response) -> list[tuple[str, str]]:
    return [(m.level_tag, m.message) for m in get_messages(response.wsgi_request)]


def _pause_state():
    return (list(DispatchPause.objects.values_list("workflow_name", "system", "reason")),
            list(ScheduleState.objects.filter(paused=True).values_list("name", flat=True)),
            list(ControlRecord.objects.order_by("id").values_list("action", "target")))


@pytest.mark.parametrize("data", NOT_PAUSED)
def test_a_dispatch_form_without_paused_leaves_the_pause_in_place(client_for, operator, data):
    client = client_for(operator)
    url = reverse("console:dispatch_pause", args=["test-orders"])
    act_on_workflow("pause_dispatch", "test-orders", user=operator, reason="INC-9 ledger")
    before = _pause_state()
    assert before[0] == [("test-orders", "", "INC-9 ledger")]
    response = client.post(url, {"reason": "incident", **data})
    assert response.status_code == 302
    assert _messages(response) == [("error", REFUSAL)]
    assert _pause_state() == before


@pytest.mark.parametrize("data", NOT_PAUSED)
def test_a_dispatch_form_without_paused_pauses_nothing(client_for, operator, data):
    response = client_for(operator).post(
        reverse("console:dispatch_pause", args=["test-orders"]), {"reason": "incident", **data})
    assert _messages(response) == [("error", REFUSAL)]
    assert _pause_state() == ([], [], [])


@pytest.mark.parametrize("data", NOT_PAUSED)
def test_a_schedule_form_without_paused_leaves_the_schedule_paused(client_for, operator,
                                                                    data):
    client = client_for(operator)
    url = reverse("console:schedule_pause", args=["test-scheduled", "every-minute"])
    act_on_workflow("pause_schedule", "test-scheduled", schedule="every-minute", user=operator,
                    reason="month-end freeze")
    before = _pause_state()
    assert before[1] == ["every-minute"]
    response = client.post(url, {"reason": "incident", **data})
    assert response.status_code == 302
    assert _messages(response) == [("error", REFUSAL)]
    assert _pause_state() == before


def test_zero_and_one_still_resume_and_pause(client_for, operator):
    client = client_for(operator)

    def shown(url, data):
        # Followed: the page drawn after the redirect shows, and so consumes, its messages.
        return [(m.level_tag, m.message)
                for m in client.post(url, data, follow=True).context["messages"]]

    url = reverse("console:dispatch_pause", args=["test-orders"])
    assert shown(url, {"paused": "1", "reason": "INC-9"}) == [
        ("success", "Dispatch of test-orders paused.")]
    assert DispatchPause.objects.filter(workflow_name="test-orders").exists()
    assert shown(url, {"paused": "0", "reason": "fixed"}) == [
        ("success", "Dispatch of test-orders resumed.")]
    assert not DispatchPause.objects.exists()
    schedule = reverse("console:schedule_pause", args=["test-scheduled", "every-minute"])
    assert shown(schedule, {"paused": "1", "reason": "freeze"}) == [
        ("success", "Schedule every-minute paused.")]
    assert shown(schedule, {"paused": "0", "reason": "thaw"}) == [
        ("success", "Schedule every-minute resumed.")]
    assert not ScheduleState.objects.filter(paused=True).exists()
