"""An operator's action that ends the wait of a run for a person (terminate, cancel)
withdraws the run's pending approval request in the same breath, as sweep_scope promises:
not a minute later at the sweep's full look. Left pending, it stayed in the approvers'
inboxes as decidable, and once the operator reopened and resumed the run within that minute
the request asked before the run ended carried over into the new wait: its old link and a
decision on it moved the reopened run on, and nobody was asked again."""

import uuid

import pytest

from approvals import decisions
from approvals.four_eyes import request_operator_action
from approvals.models import ApprovalRequest, RequestStatus
from approvals.operator_actions import act
from approvals.selectors import inbox
from audit.actions import AuditAction
from audit.models import AuditRecord
from runs.execution import executor
from runs.models import RunStatus, StepStatus
from runs.operator.actions import ActionInput
from tests.approvals.conftest import open_request, waiting_run
from tests.factories import place

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("action", ["terminate", "cancel"])
def test_ending_the_run_withdraws_its_request_at_once(action, ann, approvers, operators):
    olga, _ = operators
    run = waiting_run()
    asked = open_request(run)

    act(action, run.pk, user=olga, given=ActionInput(reason="vendor fraud"))

    asked.refresh_from_db()
    assert asked.status == RequestStatus.WITHDRAWN
    assert asked.settled_at is not None
    assert "the run ended" in asked.comment
    assert not inbox(ann).filter(pk=asked.pk).exists()
    assert AuditRecord.objects.filter(run=run, action=AuditAction.APPROVAL_WITHDRAWN).count() == 1


def test_a_request_asked_before_the_run_ended_never_decides_it_once_reopened(
        ann, approvers, operators):
    olga, _ = operators
    run = waiting_run()
    asked = open_request(run)

    act("terminate", run.pk, user=olga, given=ActionInput(reason="vendor fraud"))
    act("reopen", run.pk, user=olga, given=ActionInput(reason="fraud ruled out"))
    act("resume", run.pk, user=olga, given=ActionInput(reason="go on"))
    executor.advance_run(run.pk, worker="w1")
    run.refresh_from_db()
    assert run.status == RunStatus.WAITING

    decision = decisions.decide(asked.pk, user=ann, approved=True, decision_id=uuid.uuid4())

    assert decision.outcome == "closed"
    asked.refresh_from_db()
    assert asked.status == RequestStatus.WITHDRAWN and asked.decided_by is None
    run.refresh_from_db()
    # The reopened run still waits at its approval step, for a request of its own.
    assert run.status == RunStatus.WAITING
    assert run.steps.get(name="approve").status == StepStatus.WAITING
    assert not AuditRecord.objects.filter(run=run, action=AuditAction.APPROVAL_DECIDED).exists()
    fresh = open_request(run)
    assert fresh.pk != asked.pk
    assert ApprovalRequest.objects.filter(run=run, status=RequestStatus.PENDING).count() == 1


def test_an_end_a_second_person_approved_withdraws_the_runs_request_at_once(
        ann, approvers, operators):
    olga, omar = operators
    run = waiting_run()
    asked = open_request(run)
    terminate, created = request_operator_action(run, action="terminate", requested_by=olga,
                                                 reason="vendor fraud")
    assert created

    decision = decisions.decide(terminate.pk, user=omar, approved=True,
                                decision_id=uuid.uuid4())

    assert decision.outcome == "recorded"
    run.refresh_from_db()
    assert run.status == RunStatus.TERMINATED
    asked.refresh_from_db()
    assert asked.status == RequestStatus.WITHDRAWN and "the run ended" in asked.comment
    assert not inbox(ann).filter(pk=asked.pk).exists()


def test_a_request_left_pending_by_a_run_in_attention_never_decides_it_once_reopened(
        ann, approvers, operators):
    olga, _ = operators
    run = waiting_run()
    asked = open_request(run)
    # Held for a person with its request still pending (the sweep has not come by).
    run = place(run, status=RunStatus.ATTENTION)

    act("terminate", run.pk, user=olga, given=ActionInput(reason="vendor fraud"))
    act("reopen", run.pk, user=olga, given=ActionInput(reason="fraud ruled out"))
    asked.refresh_from_db()
    assert asked.status == RequestStatus.WITHDRAWN
    act("resume", run.pk, user=olga, given=ActionInput(reason="go on"))
    executor.advance_run(run.pk, worker="w1")
    run.refresh_from_db()
    assert run.status == RunStatus.WAITING

    decision = decisions.decide(asked.pk, user=ann, approved=True, decision_id=uuid.uuid4())

    assert decision.outcome == "closed"
    run.refresh_from_db()
    assert run.status == RunStatus.WAITING
    assert run.steps.get(name="approve").status == StepStatus.WAITING
    assert not AuditRecord.objects.filter(run=run, action=AuditAction.APPROVAL_DECIDED).exists()
