"""A person's account deactivated since the object their action carries was read (a bulk
job's worker holds one for a batch of runs) is refused on the account, read by the check's
own statement: the refusal says the account is no longer active, not that a permission is
missing, which would send whoever reads it to grant one that would change nothing."""

import pytest
from django.contrib.auth.models import Group, Permission, User

from approvals.operator_actions import ActionForbidden, refuse_who_may_not_act
from console.roles import ensure_roles
from runs.models import RunStatus, StepStatus
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


def operator() -> User:
    ensure_roles(Group, Permission)
    olga = User.objects.create_user("olga")
    olga.groups.add(Group.objects.get(name="operators"))
    return olga


def test_a_deactivated_account_is_told_it_is_no_longer_active():
    person = operator()
    run = place(new_run(), status=RunStatus.ATTENTION,
                step_statuses={"create-task": StepStatus.FAILED})
    refuse_who_may_not_act("terminate", run.pk, user=person)  # allowed: nothing raised
    User.objects.filter(pk=person.pk).update(is_active=False)

    with pytest.raises(ActionForbidden) as refused:
        refuse_who_may_not_act("terminate", run.pk, user=person)

    assert str(refused.value) == (f"olga may not terminate run {run.pk} "
                                  f"(the account is no longer active)")
    assert "needs runs." not in str(refused.value)


def test_an_active_account_without_the_permission_is_told_the_permission():
    person = User.objects.create_user("vera")
    run = place(new_run(), status=RunStatus.ATTENTION,
                step_statuses={"create-task": StepStatus.FAILED})

    with pytest.raises(ActionForbidden) as refused:
        refuse_who_may_not_act("terminate", run.pk, user=person)

    assert str(refused.value) == f"vera may not terminate run {run.pk} (needs runs.terminate_run)"
