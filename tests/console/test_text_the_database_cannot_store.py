"""Text the database cannot store (a NUL character) in a console form is refused as any other
bad input is, with a message naming the field, before anything is written: the same rule
(runs.machine.storable) that start_run, the API and the command line use. Never a 500."""

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from approvals.models import ApprovalRequest, BulkJob
from audit.models import AuditRecord
from console.models import SavedView
from runs.machine import dispatch
from runs.models import (
    ControlRecord,
    DispatchPause,
    Run,
    RunStatus,
    ScheduleState,
    StepStatus,
)
from runs.operator.actions import ACTIONS
from tests.factories import drawn, new_run, place

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_pauses():
    dispatch.forget_cache()
    yield
    dispatch.forget_cache()


def _state(run):
    run = Run.objects.get(pk=run.pk)
    return (run.status, run.audit_seq, list(run.steps.values_list("status", flat=True)),
            AuditRecord.objects.filter(run=run).count(),
            ApprovalRequest.objects.filter(run=run).count())


def _errors(response) -> list[str]:
    return [m.message for m in get_messages(response.wsgi_request) if m.level_tag == "error"]


def _act(client, run, action, **data):
    return client.post(reverse("console:action", args=[run.pk, action]),
                       {"seen": str(Run.objects.get(pk=run.pk).audit_seq), **data})


@pytest.mark.parametrize(("action", "data", "field"), [
    ("resume", {"reason": "x\x00y"}, "reason"),
    ("reconcile", {"step": "create-task", "mode": "found", "remote_ref": "x\x00",
                   "evidence": "e", "reason": "checked"}, "remote reference"),
    ("reconcile", {"step": "create-task", "mode": "not_found", "evidence": "e\x00",
                   "reason": "checked"}, "evidence"),
    ("reconcile", {"step": "create-task", "mode": "ask", "reason": "r\x00"}, "reason"),
    ("retry_step", {"step": "create\x00-task", "reason": "fixed"}, "step"),
])
def test_an_action_given_a_nul_is_refused_naming_the_field_and_changes_nothing(
        client_for, operator, stuck_run, action, data, field):
    before = _state(stuck_run)
    response = _act(client_for(operator), stuck_run, action, **data)
    assert response.status_code == 302
    assert _errors(response) == [f"{ACTIONS[action].label} was not done: {field}: NUL "
                                 "characters cannot be stored; nothing was done."]
    assert _state(stuck_run) == before


def test_an_action_that_needs_a_second_person_opens_no_request_for_a_reason_with_a_nul(
        client_for, operator):
    run = place(new_run(), status=RunStatus.ATTENTION,
                step_statuses={"create-task": StepStatus.SUCCEEDED,
                               "post-ledger": StepStatus.SUCCEEDED})
    before = _state(run)
    response = _act(client_for(operator), run, "cancel", reason="customer\x00cancelled")
    assert response.status_code == 302
    assert _errors(response) == ["Cancel was not done: reason: NUL characters cannot be "
                                 "stored; nothing was done."]
    assert _state(run) == before


def test_an_htmx_action_given_a_nul_is_refused_at_its_reason_field(client_for, operator,
                                                                   stuck_run):
    before = _state(stuck_run)
    response = client_for(operator).post(
        reverse("console:action", args=[stuck_run.pk, "resume"]),
        {"seen": str(stuck_run.audit_seq), "reason": "x\x00y"}, HTTP_HX_REQUEST="true")
    # Answered for the dialog to mark its Reason field (static/js/console.js), not redrawn.
    assert response.status_code == 422
    assert response["X-Refused-Field"] == "reason"
    assert "reason: NUL characters cannot be stored" in response.content.decode()
    assert _state(stuck_run) == before


def test_a_bulk_action_given_a_nul_is_refused_for_every_run_and_changes_nothing(
        client_for, operator, stuck_run):
    before = _state(stuck_run)
    response = client_for(operator).post(reverse("console:bulk"), {
        "action": "resume", "run": [stuck_run.pk], "reason": "x\x00y", **drawn(stuck_run)})
    assert response.status_code == 302
    assert _errors(response) == ["Resume was not done: reason: NUL characters cannot be "
                                 "stored; nothing was done."]
    assert _state(stuck_run) == before


def test_a_bulk_job_by_filter_given_a_nul_is_not_started(client_for, operator, stuck_run):
    response = client_for(operator).post(reverse("console:bulk_start"), {
        "action": "resume", "status": "attention", "reason": "x\x00y"})
    assert response.status_code == 302
    assert _errors(response) == ["Nothing was started: reason: NUL characters cannot be "
                                 "stored"]
    assert not BulkJob.objects.exists()


@pytest.mark.parametrize("data", [{"paused": "1", "reason": "r\x00"},
                                  {"paused": "1", "reason": "r", "system": "ledger\x00"}])
def test_pausing_dispatch_with_a_nul_is_refused_naming_the_field(client_for, operator, data):
    response = client_for(operator).post(
        reverse("console:dispatch_pause", args=["test-orders"]), data)
    assert response.status_code == 302
    field = "system" if "\x00" in data.get("system", "") else "reason"
    assert _errors(response) == [f"Nothing was changed: {field}: NUL characters cannot be "
                                 "stored."]
    assert not DispatchPause.objects.exists() and not ControlRecord.objects.exists()


def test_pausing_a_schedule_with_a_nul_is_refused_naming_the_field(client_for, operator):
    response = client_for(operator).post(
        reverse("console:schedule_pause", args=["test-scheduled", "every-minute"]),
        {"paused": "1", "reason": "freeze\x00"})
    assert response.status_code == 302
    assert _errors(response) == ["Nothing was changed: reason: NUL characters cannot be "
                                 "stored."]
    assert not ControlRecord.objects.exists()
    assert not ScheduleState.objects.filter(paused=True).exists()


def test_a_saved_view_named_with_a_nul_is_refused_naming_the_name(client_for, operator):
    response = client_for(operator).post(reverse("console:save_view"),
                                         {"name": "a\x00b", "query": "status=attention"})
    assert response.status_code == 302
    assert _errors(response) == ["The view was not saved: A view's name: NUL characters "
                                 "cannot be stored."]
    assert not SavedView.objects.exists()
