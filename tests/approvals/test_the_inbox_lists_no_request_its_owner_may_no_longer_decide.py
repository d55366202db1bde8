"""The inbox (the console's and the API's) lists what its owner may decide by the rule that
refuses or allows the decision itself: an operator asked to approve another's action because
they held its permission on the run's workflow, and who has since lost it, is refused the
decision (approvals.permissions.still_an_approver), so the request leaves their inbox too,
rather than sitting there as work they cannot do."""

import pytest
from django.contrib.auth.models import Group, Permission, User
from guardian.shortcuts import assign_perm, remove_perm

from approvals import four_eyes
from approvals.permissions import can_decide
from approvals.selectors import inbox
from console.roles import ensure_roles
from runs.execution import executor
from runs.models import RunStatus, Workflow
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


@pytest.fixture
def request_for_terminate(script):
    ensure_roles(Group, Permission)
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    run = place(run, status=RunStatus.ATTENTION)
    olga = User.objects.create_user("olga", email="olga@example.com", password="pw")
    olga.groups.add(Group.objects.get(name="operators"))
    return run, olga


def _person(name, *groups):
    user = User.objects.create_user(name, email=f"{name}@example.com", password="pw")
    for group in groups:
        user.groups.add(Group.objects.get(name=group))
    return user


def test_an_approver_who_lost_the_actions_permission_no_longer_finds_it_in_the_inbox(
        request_for_terminate):
    run, olga = request_for_terminate
    fin = _person("fin")  # terminate_run on this workflow's row only
    workflow = Workflow.objects.get(name=run.workflow_name)
    assign_perm("runs.terminate_run", fin, workflow)
    omar = _person("omar", "operators")  # a four-eyes approver by the setting's group
    request, _ = four_eyes.request_operator_action(run, action="terminate", requested_by=olga,
                                                   reason="duplicate order")
    assert list(inbox(fin)) == [request] and can_decide(fin, request)

    remove_perm("runs.terminate_run", fin, workflow)
    fin = User.objects.get(pk=fin.pk)  # the permission cache of the old object goes

    assert not can_decide(fin, request)
    assert list(inbox(fin)) == []
    assert list(inbox(omar)) == [request]
    assert list(inbox(olga)) == []  # four eyes: never the one who asked
