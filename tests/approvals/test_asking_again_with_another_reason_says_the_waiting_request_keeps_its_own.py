"""One open request per action and run: a person who asks again for an action that already
waits for a second person is answered with that request, which keeps the reason it was asked
with (its approver decides what was asked, and its links name it). The answer says so when
the reason given now differs, so nobody believes their reason reached the approver."""

import pytest
from django.contrib.auth.models import Group, Permission, User

from approvals.models import ApprovalRequest
from approvals.operator_actions import act
from console.roles import ensure_roles
from runs.models import RunStatus, StepStatus
from runs.operator.actions import ActionInput
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


@pytest.fixture
def people(db):
    ensure_roles(Group, Permission)
    olga = User.objects.create_user("olga", password="olga-pw")
    carl = User.objects.create_user("carl", password="carl-pw")
    for user in (olga, carl):
        user.groups.add(Group.objects.get(name="operators"))
    return olga, carl


@pytest.fixture
def paid_run():
    """A run whose high-impact step took place: ending it needs a second person."""
    return place(new_run(), status=RunStatus.ATTENTION,
                 step_statuses={"create-task": StepStatus.SUCCEEDED,
                                "post-ledger": StepStatus.SUCCEEDED})


def test_a_new_reason_is_said_not_to_be_added_to_the_waiting_request(people, paid_run):
    olga, carl = people
    first = act("terminate", paid_run.pk, user=olga, given=ActionInput(reason="vendor fraud"))
    again = act("terminate", paid_run.pk, user=olga,
                given=ActionInput(reason="duplicate invoice, not fraud"))
    assert (first.created, again.created, again.approval.pk) == (True, False, first.approval.pk)
    assert again.message == (
        f"A second person must approve this: approval request {first.approval.pk} already "
        "waits, asked by olga with the reason \"vendor fraud\"; the reason given now is not "
        "added to it (the approver decides the request as it was asked); nothing was done yet.")
    kept = ApprovalRequest.objects.get()
    assert kept.snapshot["reason"] == "vendor fraud"
    assert "duplicate invoice" not in str(kept.snapshot) + str(kept.params)


def test_the_same_reason_again_is_answered_plainly(people, paid_run):
    olga, _ = people
    first = act("terminate", paid_run.pk, user=olga, given=ActionInput(reason="vendor fraud"))
    again = act("terminate", paid_run.pk, user=olga, given=ActionInput(reason=" vendor fraud "))
    assert again.message == (
        f"A second person must approve this: approval request {first.approval.pk} already "
        "waits; nothing was done yet.")
    assert ApprovalRequest.objects.count() == 1
