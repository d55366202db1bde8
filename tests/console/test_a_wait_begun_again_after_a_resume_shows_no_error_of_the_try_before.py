"""A wait that failed (its event did not come in time, its approval was rejected by its
timeout policy) and that a person resumed waits again with no error: the step's row keeps
no error of the try before, so show_run, the run page and the API all show the step
waiting and nothing wrong with it. show_run printed the timeout's "no payment.settled event
arrived by ..." (or "rejected by ...") beside the step waiting again, as if it were
current. The earlier try's error stays where it is evidence: in its audit record. So too
for the attempt of a step with the stop verdict, a person's rejection of which failed it
("attempt 1 rejected by pia: no; nothing was sent" stayed beside the attempt waiting
again): that wait now begins where every wait does (wait_rows.wait_began)."""

import io
import json
import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from api.tokens import token_create
from audit.actions import AuditAction
from audit.chain import Actor
from audit.models import AuditRecord
from runs.execution import executor
from runs.machine import transitions
from runs.models import AttentionReason, Run, RunStatus, Step, StepStatus
from runs.operator.actions import ACTIONS, ActionInput
from tests.factories import new_run, step

pytestmark = pytest.mark.django_db
OLGA = Actor(kind="user", label="olga")


def _advance(run: Run) -> Run:
    executor.advance_run(run.pk, worker="w1")
    return Run.objects.get(pk=run.pk)


def _resume(run: Run) -> Run:
    ACTIONS["resume"].perform(run.pk, actor=OLGA, given=ActionInput(reason="asked again"))
    run = _advance(run)
    assert run.status == RunStatus.WAITING
    return run


def _shown_by_show_run(run: Run, name: str) -> tuple[str, dict]:
    """The step's line of show_run's text, and its entry of show_run --json."""
    text, as_json = io.StringIO(), io.StringIO()
    call_command("show_run", str(run.pk), stdout=text)
    call_command("show_run", str(run.pk), "--json", stdout=as_json)
    # The step's row, not a line saying what it waits for.
    line = next(line for line in text.getvalue().splitlines()
                if re.match(rf"  {re.escape(name)} +\S+ +attempt \d", line))
    entry = next(s for s in json.loads(as_json.getvalue())["steps"] if s["name"] == name)
    return line, entry


def _run_page_row(client, run: Run, name: str) -> str:
    number = step(run, name).position + 1
    page = client.get(reverse("console:run", kwargs={"run_id": run.pk}))
    assert page.status_code == 200
    return re.search(rf'<tr id="step-{number}">.*?</tr>', page.content.decode(), re.S).group(0)


def _api_run(client, run: Run) -> dict:
    _, plaintext = token_create(name="erp", workflows=[run.workflow_name])
    response = client.get(f"/api/runs/{run.pk}", HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    assert response.status_code == 200
    return response.json()


def _all_show_it_waiting_with_no_error(client, run: Run, name: str, earlier: str) -> None:
    row = Step.objects.get(run=run, name=name)
    assert (row.status, row.error_class, row.error_message) == (StepStatus.WAITING, "", "")
    line, entry = _shown_by_show_run(run, name)
    assert StepStatus.WAITING in line
    assert earlier not in line
    assert (entry["status"], entry["error_class"], entry["error"]) == (StepStatus.WAITING,
                                                                       None, "")
    page_row = _run_page_row(client, run, name)
    assert "waiting" in page_row
    assert earlier not in page_row and "s-failed" not in page_row
    api = _api_run(client, run)
    assert api["state"] == "waiting" and api["current_step"]["name"] == name
    assert api["current_step"]["status"] == StepStatus.WAITING
    assert api["last_error"] is None


def test_an_event_wait_resumed_after_its_timeout_waits_again_with_no_error(script, client):
    client.force_login(User.objects.create_superuser("root"))
    run = _advance(new_run("test-payment-fail"))
    past = timezone.now() - timedelta(minutes=5)
    Step.objects.filter(run=run, name="payment").update(next_attempt_at=past)
    Run.objects.filter(pk=run.pk).update(next_wake_at=past)
    run = _advance(run)
    assert run.attention_reason == AttentionReason.EVENT_TIMED_OUT
    waited = step(run, "payment").error_message
    assert waited.startswith("no payment.settled event arrived")

    run = _resume(run)

    _all_show_it_waiting_with_no_error(client, run, "payment", "arrived")
    # The timeout's record keeps what went wrong; resuming took nothing from the trail.
    timed_out = AuditRecord.objects.get(run=run, action=AuditAction.EVENT_TIMED_OUT)
    assert timed_out.data["error"] == waited
    awaited = AuditRecord.objects.filter(run=run, action=AuditAction.EVENT_AWAITED)
    assert awaited.count() == 2
    # It still waits for its event: one that comes ends the wait and the run.
    transitions.deliver_event(run.pk, step_name="payment", source="psp", event_id="evt-1",
                              payload={"amount": 12, "reference": "psp-1"},
                              actor=Actor.system("psp"))
    assert _advance(run).status == RunStatus.COMPLETED


def test_an_approval_resumed_after_its_timeout_rejected_it_waits_again_with_no_error(
        script, client):
    client.force_login(User.objects.create_superuser("root"))
    run = _advance(new_run("test-approval"))
    # As the approvals sweep applies the "reject" timeout policy (approvals.application).
    comment = "no decision within 3.0 days: rejected by the timeout policy"
    transitions.decide_approval(run.pk, step_name="approve", approved=False,
                                actor=Actor.system("approvals"), comment=comment)
    run = Run.objects.get(pk=run.pk)
    assert run.attention_reason == AttentionReason.APPROVAL_REJECTED
    assert step(run, "approve").error_message.startswith("rejected by approvals")

    run = _resume(run)

    _all_show_it_waiting_with_no_error(client, run, "approve", "rejected")
    decided = AuditRecord.objects.get(run=run, action=AuditAction.APPROVAL_DECIDED)
    assert decided.reason == comment and decided.data["approved"] is False
    assert AuditRecord.objects.filter(run=run,
                                      action=AuditAction.APPROVAL_REQUESTED).count() == 2


def test_a_stop_verdict_attempt_resumed_after_its_rejection_waits_again_with_no_error(client):
    client.force_login(User.objects.create_superuser("root"))
    run = _advance(new_run("test-stop-verdict", amount=120))
    assert step(run, "pay-unkeyed").status == StepStatus.WAITING
    transitions.decide_approval(run.pk, step_name="pay-unkeyed", approved=False,
                                actor=Actor(kind="user", label="pia"), comment="no")
    run = Run.objects.get(pk=run.pk)
    assert run.attention_reason == AttentionReason.APPROVAL_REJECTED
    rejected = step(run, "pay-unkeyed").error_message
    assert rejected == "attempt 1 rejected by pia: no; nothing was sent"

    run = _resume(run)

    _all_show_it_waiting_with_no_error(client, run, "pay-unkeyed", "rejected")
    # The rejection's record keeps it; the attempt waits for a person's approval again.
    decided = AuditRecord.objects.get(run=run, action=AuditAction.APPROVAL_DECIDED)
    assert decided.data["approved"] is False and decided.reason == "no"
    assert AuditRecord.objects.filter(run=run,
                                      action=AuditAction.APPROVAL_REQUESTED).count() == 2
    assert run.approval_waits.filter(step_name="pay-unkeyed").exists()
