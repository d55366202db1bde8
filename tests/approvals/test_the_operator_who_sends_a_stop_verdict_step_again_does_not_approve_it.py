"""Four eyes on a step with the stop verdict, as on an agent's tool call: the operator who
sends its attempt again (Retry step, or Resume of the run it stopped) is the requester of the
approval that attempt waits for, so they may not approve their own resend, by any path, and
are not asked; another approver decides it. An attempt nobody sent by hand (the first, or a
retry after a transient error) has no requester."""

import uuid

import pytest
from django.contrib.auth.models import Group, User
from django.core.exceptions import PermissionDenied

from approvals import decisions, requests
from approvals.models import ApprovalRequest, Notification, RequestStatus
from approvals.permissions import can_decide
from approvals.selectors import inbox
from audit.chain import Actor
from runs.execution import executor
from runs.machine import transitions
from runs.machine.transitions import start_run
from runs.models import RunStatus
from tests.factories import SYSTEM
from tests.receiver import ScriptedReceiver
from tests.workflows import stop_receiver

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _receiver():
    with ScriptedReceiver() as server:
        stop_receiver.url = server.url
        # The first approved attempt is refused for good; any later one is paid.
        server.answer("POST", "/pay", 400, 200)
        yield server
    stop_receiver.url = ""


def _approver(name):
    user = User.objects.create_user(name, email=f"{name}@example.com", password="pw")
    user.groups.add(Group.objects.get_or_create(name="stop-approvers")[0])
    return user


@pytest.fixture
def pia(db):
    return _approver("pia")


@pytest.fixture
def quinn(db):
    return _approver("quinn")


def _newest_request(run) -> ApprovalRequest:
    assert requests.open_pending_requests() == 1
    return ApprovalRequest.objects.filter(run=run).order_by("pk").last()


def _decide(approval, user, *, approved=True):
    return decisions.decide(approval.pk, user=user, approved=approved,
                            decision_id=uuid.uuid4(), comment="" if approved else "no")


def _stopped_after_first_attempt(order, first_approver):
    """A stop-verdict payment whose first attempt, approved, was refused for good."""
    run, _ = start_run(workflow="test-stop-verdict", business_key=order,
                       input={"order": order, "amount": 120}, actor=SYSTEM)
    executor.advance_run(run.pk, worker="w1")
    first = _newest_request(run)
    assert first.requested_by is None  # nobody sent the first attempt by hand
    assert _decide(first, first_approver).recorded
    executor.advance_run(run.pk, worker="w1")
    run.refresh_from_db()
    assert run.status == RunStatus.ATTENTION
    return run


@pytest.mark.parametrize("send_again", ["retry_step", "resume"])
def test_the_operator_who_sent_the_attempt_again_may_not_approve_it(send_again, pia, quinn):
    run = _stopped_after_first_attempt(f"stop-{send_again}", quinn)
    if send_again == "retry_step":
        transitions.retry_step(run.pk, step_name="pay-unkeyed", actor=Actor.for_user(pia),
                               reason="the vendor fixed its account")
    else:
        transitions.resume(run.pk, actor=Actor.for_user(pia),
                           reason="the vendor fixed its account")
    executor.advance_run(run.pk, worker="w1")
    second = _newest_request(run)
    assert second.snapshot["attempt"] == 2

    assert second.requested_by == pia
    assert not can_decide(pia, second)
    with pytest.raises(PermissionDenied, match="four eyes"):
        _decide(second, pia)
    assert not inbox(pia).filter(pk=second.pk).exists()
    assert not Notification.objects.filter(request=second, user=pia).exists()
    assert Notification.objects.filter(request=second, user=quinn).exists()

    assert _decide(second, quinn).recorded
    second.refresh_from_db()
    assert second.status == RequestStatus.APPROVED


def test_the_person_who_approved_the_last_attempt_decides_the_next_when_nobody_resent_it(
        pia, quinn):
    run = _stopped_after_first_attempt("stop-system", pia)
    # Sent again by automation (no person): whoever approved before may approve again.
    transitions.retry_step(run.pk, step_name="pay-unkeyed", actor=SYSTEM,
                           reason="scheduled resend")
    executor.advance_run(run.pk, worker="w1")
    second = _newest_request(run)
    assert second.requested_by is None
    assert can_decide(pia, second) and can_decide(quinn, second)
