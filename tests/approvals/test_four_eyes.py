"""Four eyes for operators: an operator's action on a run with a succeeded high-impact step
waits for a second person's approval through the same requests, links and decisions."""

import uuid

import pytest
from django.contrib.auth.models import Group, User
from django.core.exceptions import PermissionDenied

from approvals import services
from approvals.models import ApprovalRequest, Notification
from approvals.operator_actions import (
    operator_action,
    register_operator_action,
    unregister_operator_action,
)
from approvals.permissions import can_decide, can_view
from runs import executor, transitions
from runs.models import RunStatus
from tests.approvals.conftest import later
from tests.factories import new_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def operators(db):
    group, _ = Group.objects.get_or_create(name="operators")
    olga = User.objects.create_user("olga", email="olga@example.com")
    omar = User.objects.create_user("omar", email="omar@example.com")
    group.user_set.add(olga, omar)
    return olga, omar


@pytest.fixture
def calls():
    calls = []

    def terminate(*, run_id, requested_by, approved_by, reason, params):
        calls.append({"run_id": run_id, "requested_by": requested_by.label,
                      "approved_by": approved_by.label, "reason": reason, "params": params})
        transitions.terminate(run_id, actor=requested_by,
                              reason=f"{reason} (approved by {approved_by.label})")

    # Stands in for the console's own registration for the length of the test.
    console_terminate = operator_action("terminate")
    unregister_operator_action("terminate")
    register_operator_action("terminate", terminate)
    yield calls
    unregister_operator_action("terminate")
    if console_terminate is not None:
        register_operator_action("terminate", console_terminate)


@pytest.fixture
def completed_run(script):
    """A test-orders run whose high-impact post-ledger step succeeded."""
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    return run


@pytest.fixture
def stopped_run(script):
    """A test-orders run stopped in attention before its high-impact step."""
    from runs.errors import PermanentError

    script.plan["create-task"] = [PermanentError("403")]
    run = new_run()
    executor.advance_run(run.pk, worker="w1")
    run.refresh_from_db()
    return run


def test_four_eyes_is_required_for_compensate_and_terminate_after_a_high_impact_step(
        completed_run, stopped_run):
    assert services.four_eyes_required(completed_run, "compensate")
    assert services.four_eyes_required(completed_run, "terminate")
    assert not services.four_eyes_required(completed_run, "resume")
    assert not services.four_eyes_required(stopped_run, "terminate")


def test_the_requester_may_not_decide_another_operator_may_and_the_action_runs_once(
        stopped_run, operators, calls, mailoutbox, t0):
    olga, omar = operators
    olga.is_superuser = True  # not even a superuser approves their own request
    olga.save()
    request, created = services.request_operator_action(
        stopped_run, action="terminate", requested_by=olga, reason="vendor fraud",
        params={"ticket": "OPS-7"}, now=t0)
    assert created and request.kind == "operator_action" and request.status == "pending"
    assert request.snapshot["action"] == "terminate"
    assert request.snapshot["requested_by"] == "olga"
    assert request.snapshot["reason"] == "vendor fraud"
    assert request.params == {"ticket": "OPS-7"}
    assert request.due_at == later(t0, days=1) and request.on_timeout == "cancel"
    # Only the other operator is asked.
    assert list(Notification.objects.filter(request=request)
                .values_list("recipient", flat=True)) == ["omar@example.com"]

    assert can_view(olga, request) and not can_decide(olga, request)
    with pytest.raises(PermissionDenied):
        services.decide(request.pk, user=olga, approved=True, decision_id=uuid.uuid4())
    assert calls == []

    again, created = services.request_operator_action(
        stopped_run, action="terminate", requested_by=omar, reason="same thing")
    assert again == request and not created

    result = services.decide(request.pk, user=omar, approved=True, comment="agreed",
                             decision_id=uuid.uuid4())
    assert result.recorded
    assert calls == [{"run_id": stopped_run.pk, "requested_by": "olga", "approved_by": "omar",
                      "reason": "vendor fraud", "params": {"ticket": "OPS-7"}}]
    request.refresh_from_db()
    assert request.settled_at is not None and request.apply_error == ""
    stopped_run.refresh_from_db()
    assert stopped_run.status == RunStatus.TERMINATED
    assert "approved by omar" in stopped_run.status_message
    # A second click, or the sweeper, does not run it again.
    services.sweep(now=later(t0, days=5))
    assert len(calls) == 1


def test_a_rejected_or_expired_operator_request_does_nothing(stopped_run, operators, calls, t0):
    olga, omar = operators
    request, _ = services.request_operator_action(
        stopped_run, action="terminate", requested_by=olga, reason="r", now=t0)
    services.decide(request.pk, user=omar, approved=False, comment="not needed",
                    decision_id=uuid.uuid4())
    request.refresh_from_db()
    assert request.status == "rejected" and request.settled_at is not None
    expiring, created = services.request_operator_action(
        stopped_run, action="terminate", requested_by=olga, reason="again", now=t0)
    assert created
    services.sweep(now=later(t0, days=1))
    expiring.refresh_from_db()
    assert expiring.status == "expired" and expiring.settled_at is not None
    assert calls == []
    stopped_run.refresh_from_db()
    assert stopped_run.status == RunStatus.ATTENTION


def test_an_unregistered_action_or_a_missing_reason_is_refused(stopped_run, operators):
    olga, _ = operators
    with pytest.raises(ValueError, match="no operator action 'delete'"):
        services.request_operator_action(stopped_run, action="delete", requested_by=olga,
                                         reason="x")
    register_operator_action("noop", lambda **kwargs: None)
    try:
        with pytest.raises(ValueError, match="needs a reason"):
            services.request_operator_action(stopped_run, action="noop", requested_by=olga,
                                             reason="  ")
    finally:
        unregister_operator_action("noop")
    assert ApprovalRequest.objects.count() == 0


def test_registering_two_functions_under_one_name_is_refused():
    def first(**kwargs):
        pass

    register_operator_action("twice", first)
    try:
        register_operator_action("twice", first)  # the same function again is fine
        with pytest.raises(ValueError, match="already registered"):
            register_operator_action("twice", lambda **kwargs: None)
    finally:
        unregister_operator_action("twice")
