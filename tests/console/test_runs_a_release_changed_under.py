"""Runs whose workflow a release changed without a new version (a step renamed or removed,
an input schema narrowed) still show: the run page, its live part redrawn after an htmx
action, the investigation and the API read each answer, never a server error. What can no
longer be read from the code says so (a compensation preview that cannot be built). The
worker holds such a run for a person at its claim instead of failing on it."""

import pytest
from django.urls import reverse

from api.tokens import token_create
from audit.models import AuditRecord
from demo.sandbox import faults
from demo.sandbox.models import Task
from runs.agents.tool_call_undo import undo_tool_call
from runs.execution import executor
from runs.machine import transitions
from runs.machine.errors import TransitionNotAllowed
from runs.models import AttentionReason, Run, RunStatus, Step, StepStatus, ToolCall
from runs.operator.reconciliation import reconcile_step
from tests.agent_runs import LARGE, advance, start_triage
from tests.factories import SYSTEM, new_run, place

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def sandbox(live_sandbox):
    return live_sandbox


def _every_view_answers(client, run):
    for url, headers in ((reverse("console:run", args=[run.pk]), {}),
                         (reverse("console:run", args=[run.pk]) + "?part=live",
                          {"HTTP_HX_REQUEST": "true"}),
                         (reverse("console:investigation", args=[run.pk]), {}),
                         (reverse("console:investigation", args=[run.pk]) + "?lookups=1", {})):
        response = client.get(url, **headers)
        assert response.status_code == 200, (url, response.status_code)
    run.refresh_from_db()
    # An action posted with htmx draws the run's live part again afterwards.
    response = client.post(reverse("console:action", args=[run.pk, "reopen"]),
                           {"seen": str(run.audit_seq), "reason": "looking"},
                           HTTP_HX_REQUEST="true")
    assert response.status_code in (200, 400, 409), response.status_code


def test_a_completed_run_with_a_renamed_write_step_shows_and_cannot_run_on(
        script, client_for, operator):
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    Step.objects.filter(run=run, name="create-task").update(name="create-task-v0")
    client = client_for(operator)
    _every_view_answers(client, run)
    page = client.get(reverse("console:run", args=[run.pk])).content.decode()
    assert "create-task-v0" in page


def test_an_agent_run_whose_agent_step_was_renamed_shows_and_waits_for_a_person(
        client_for, operator, client):
    run = advance(start_triage(LARGE, key="tenant-42:renamed"))
    assert run.status == RunStatus.WAITING  # the posting waits for a person's approval
    Step.objects.filter(run=run, name="triage").update(name="triage-old")
    _every_view_answers(client_for(operator), run)
    # The integrator's reads too.
    _, plaintext = token_create(name="erp", workflows=["invoice-triage"], rate_limit=None)
    for url in (f"/api/runs/{run.pk}", f"/api/runs/{run.pk}/investigation"):
        response = client.get(url, HTTP_AUTHORIZATION=f"Bearer {plaintext}")
        assert response.status_code == 200, (url, response.content)

    # A worker that claims it holds it for a person, naming the step, instead of failing.
    Run.objects.filter(pk=run.pk).update(status=RunStatus.QUEUED, next_wake_at=None)
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    run.refresh_from_db()
    assert run.attention_reason == AttentionReason.DEFINITION_MISSING
    assert run.status_message == ("invoice-triage v1 in this worker has no step "
                                  "'triage-old' of this run")


def test_an_undo_whose_preview_needs_an_input_the_schema_refuses_says_so(
        client_for, operator):
    run, _ = transitions.start_run(
        workflow="invoice-approval", business_key="tenant-42:INV-2001-preview",
        input={"tenant": "tenant-42", "approver_email": "approver@example.com",
               "invoice_number": "INV-2001"}, actor=SYSTEM, wake=False)
    run = advance(run)
    assert run.status == RunStatus.WAITING  # notify-approver done; its undo has a preview
    Run.objects.filter(pk=run.pk).update(input={"x": 1})
    client = client_for(operator)
    _every_view_answers(client, run)
    page = client.get(reverse("console:run", args=[run.pk])).content.decode()
    assert "not available" in page and "no longer accepts this run&#x27;s input" in page


def test_a_lookup_by_key_of_a_renamed_step_is_refused_with_the_reason(script):
    run = place(new_run(), status=RunStatus.ATTENTION,
                step_statuses={"fetch": StepStatus.SUCCEEDED, "classify": StepStatus.SUCCEEDED,
                               "create-task": StepStatus.UNKNOWN})
    Step.objects.filter(run=run, name="create-task").update(name="create-task-v0")
    with pytest.raises(TransitionNotAllowed, match="has no step 'create-task-v0' any more"):
        reconcile_step(run.pk, step_name="create-task-v0", actor=SYSTEM, reason="look it up")
    assert script.reconcile_calls == []


def test_undoing_one_call_of_a_run_its_schema_refuses_is_refused_before_anything_counts():
    faults.add("ledger.post", faults.FORBIDDEN, times=1)
    run = advance(start_triage(key="tenant-42:undo-refused"))
    assert run.attention_reason == AttentionReason.PERMANENT_ERROR, run.status_message
    task_call = ToolCall.objects.get(step__run=run, tool="open-approval-task")
    Run.objects.filter(pk=run.pk).update(input={"tenant": 42})
    records = AuditRecord.objects.filter(run=run).count()
    with pytest.raises(TransitionNotAllowed, match="no longer accepts this run's input"):
        undo_tool_call(run.pk, step_name="triage", call_ref=task_call.ref, actor=SYSTEM,
                       reason="invoice withdrawn")
    task_call.refresh_from_db()
    assert task_call.status == "succeeded" and task_call.compensation_attempt == 0
    assert AuditRecord.objects.filter(run=run).count() == records
    assert Task.objects.get().status != Task.CANCELLED
