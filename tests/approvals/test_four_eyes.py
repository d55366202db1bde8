"""Four eyes for operators: an operator's action on a run with a succeeded high-impact step
waits for a second person's approval through the same requests, links and decisions."""

import uuid

import pytest
from django.core.exceptions import PermissionDenied

from approvals import application, decisions, four_eyes, schedule
from approvals.models import ApprovalRequest, Notification
from approvals.permissions import can_decide, can_view
from audit.chain import Actor
from audit.models import AuditRecord
from runs.execution import executor
from runs.machine.errors import SecondPersonRequired
from runs.models import Run, RunStatus, Step
from runs.operator.actions import ACTIONS, ActionInput
from tests.approvals.conftest import later
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


@pytest.fixture
def stopped_run(script):
    """A test-orders run in attention after its high-impact post-ledger step succeeded
    (an operator reopened it, say)."""
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    return place(run, status=RunStatus.ATTENTION)


@pytest.fixture
def early_run(script):
    """A test-orders run stopped in attention before its high-impact step."""
    from runs.machine.errors import PermanentError

    script.plan["create-task"] = [PermanentError("403")]
    run = new_run()
    executor.advance_run(run.pk, worker="w1")
    run.refresh_from_db()
    return run


def _terminations(run):
    return AuditRecord.objects.filter(run=run, action="terminated").count()


def test_four_eyes_is_required_to_end_or_undo_a_run_after_a_high_impact_step(
        stopped_run, early_run):
    steps = list(Step.objects.filter(run=stopped_run))
    for action in ("compensate", "terminate", "cancel"):
        assert ACTIONS[action].needs_second_person(steps)
    assert not ACTIONS["resume"].needs_second_person(steps)
    assert not ACTIONS["terminate"].needs_second_person(list(Step.objects.filter(
        run=early_run)))


def test_the_requester_may_not_decide_another_operator_may_and_the_action_runs_once(
        stopped_run, operators, mailoutbox, t0):
    olga, omar = operators
    olga.is_superuser = True  # not even a superuser approves their own request
    olga.save()
    request, created = four_eyes.request_operator_action(
        stopped_run, action="terminate", requested_by=olga, reason="vendor fraud",
        now=t0)
    assert created and request.kind == "operator_action" and request.status == "pending"
    assert request.snapshot["action"] == "terminate"
    assert request.snapshot["requested_by"] == "olga"
    assert request.snapshot["reason"] == "vendor fraud"
    assert request.due_at == later(t0, days=1) and request.on_timeout == "cancel"
    # Only the other operator is asked.
    assert list(Notification.objects.filter(request=request)
                .values_list("recipient", flat=True)) == ["omar@example.com"]

    assert can_view(olga, request) and not can_decide(olga, request)
    with pytest.raises(PermissionDenied):
        decisions.decide(request.pk, user=olga, approved=True, decision_id=uuid.uuid4())
    assert _terminations(stopped_run) == 0

    again, created = four_eyes.request_operator_action(
        stopped_run, action="terminate", requested_by=omar, reason="same thing")
    assert again == request and not created

    result = decisions.decide(request.pk, user=omar, approved=True, comment="agreed",
                              decision_id=uuid.uuid4())
    assert result.recorded
    request.refresh_from_db()
    assert request.settled_at is not None and request.apply_error == ""
    stopped_run.refresh_from_db()
    assert stopped_run.status == RunStatus.TERMINATED
    record = AuditRecord.objects.get(run=stopped_run, action="terminated")
    assert record.actor_label == "olga" and record.reason == "vendor fraud"
    assert record.data["approved_by"] == "omar"
    # A second click, or the sweeper, does not run it again.
    schedule.sweep(now=later(t0, days=5))
    assert _terminations(stopped_run) == 1


def test_a_rejected_or_expired_operator_request_does_nothing(stopped_run, operators, t0):
    olga, omar = operators
    request, _ = four_eyes.request_operator_action(
        stopped_run, action="terminate", requested_by=olga, reason="r", now=t0)
    decisions.decide(request.pk, user=omar, approved=False, comment="not needed",
                     decision_id=uuid.uuid4())
    request.refresh_from_db()
    assert request.status == "rejected" and request.settled_at is not None
    expiring, created = four_eyes.request_operator_action(
        stopped_run, action="terminate", requested_by=olga, reason="again", now=t0)
    assert created
    schedule.sweep(now=later(t0, days=1))
    expiring.refresh_from_db()
    assert expiring.status == "expired" and expiring.settled_at is not None
    assert _terminations(stopped_run) == 0
    stopped_run.refresh_from_db()
    assert stopped_run.status == RunStatus.ATTENTION


def test_an_action_without_four_eyes_or_a_missing_reason_is_refused(stopped_run, operators):
    olga, _ = operators
    for action in ("delete", "resume"):
        with pytest.raises(ValueError, match="not an operator action that takes a second"):
            four_eyes.request_operator_action(stopped_run, action=action, requested_by=olga,
                                              reason="x")
    with pytest.raises(ValueError, match="needs a reason"):
        four_eyes.request_operator_action(stopped_run, action="terminate", requested_by=olga,
                                          reason="  ")
    assert ApprovalRequest.objects.count() == 0


def test_the_transition_refuses_a_terminate_without_the_second_person(stopped_run, operators):
    olga, _ = operators
    with pytest.raises(SecondPersonRequired):
        ACTIONS["terminate"].perform(stopped_run.pk, actor=Actor.for_user(olga),
                                     given=ActionInput(reason="fraud"))
    assert Run.objects.get(pk=stopped_run.pk).status == RunStatus.ATTENTION


def test_a_four_eyes_decision_is_recorded_with_its_id_and_recognised_by_it(
        stopped_run, operators, t0):
    olga, omar = operators
    request, _ = four_eyes.request_operator_action(
        stopped_run, action="terminate", requested_by=olga, reason="vendor fraud", now=t0)
    decision_id = uuid.uuid4()
    decisions.decide(request.pk, user=omar, approved=True, decision_id=decision_id, now=t0)
    record = AuditRecord.objects.get(run=stopped_run, action="terminated")
    assert record.data["decision_id"] == str(decision_id)
    assert record.data["approved_by"] == "omar" and record.actor_label == "olga"
    # As if the request had not been marked settled: applying it again finds the run's
    # record by the decision's id, takes no action and records no refusal.
    ApprovalRequest.objects.filter(pk=request.pk).update(settled_at=None)
    assert application.apply_to_run(request.pk, now=t0)
    request.refresh_from_db()
    assert request.apply_error == "" and _terminations(stopped_run) == 1
