"""Four eyes that a second operator can complete: the request reaches every other person
holding the action's permission on the run's workflow (globally, through a group, or on
that workflow's row), each of them may decide it, nobody else is asked; the demo seeds two
such operators; signing in lands on a page the person may see."""

import io
import uuid

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.core.management import call_command
from guardian.shortcuts import assign_perm

from approvals import decisions, four_eyes
from approvals.models import Notification
from approvals.permissions import can_decide
from console.roles import ensure_roles
from runs.execution import executor
from runs.models import Run, RunStatus, Workflow
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def roles(db):
    # Transactional tests flush the database, the role groups the migration made included.
    ensure_roles(Group, Permission)


@pytest.fixture
def stopped_run(script):
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    return place(run, status=RunStatus.ATTENTION)


def person(name, *groups):
    user = User.objects.create_user(name, email=f"{name}@example.com", password="pw")
    for group in groups:
        user.groups.add(Group.objects.get_or_create(name=group)[0])
    return user


def test_every_other_holder_of_the_permission_is_asked_and_may_decide(stopped_run):
    olga = person("olga", "operators")  # asks
    omar = person("omar", "operators")  # the global permission, through the group
    fin = person("fin")  # terminate_run on this workflow's row only
    assign_perm("runs.terminate_run", fin, Workflow.objects.get(name="test-orders"))
    other = person("other")  # terminate_run on another workflow only
    new_run("test-approval")
    assign_perm("runs.terminate_run", other, Workflow.objects.get(name="test-approval"))
    viewer = person("vera", "auditors")  # sees runs, may not terminate
    request, _ = four_eyes.request_operator_action(
        stopped_run, action="terminate", requested_by=olga, reason="duplicate")
    asked = set(Notification.objects.filter(request=request)
                .values_list("recipient", flat=True))
    assert asked == {"omar@example.com", "fin@example.com"}
    assert "nobody to notify" not in request.problem
    assert can_decide(omar, request) and can_decide(fin, request)
    assert not can_decide(olga, request) and not can_decide(other, request)
    assert not can_decide(viewer, request)
    result = decisions.decide(request.pk, user=fin, approved=True, comment="agreed",
                              decision_id=uuid.uuid4())
    assert result.recorded
    assert Run.objects.get(pk=stopped_run.pk).status == RunStatus.TERMINATED


def test_the_demo_seeds_two_operators_who_can_decide_each_others_requests(stopped_run):
    call_command("seed_demo", stdout=io.StringIO())
    operator, deputy = User.objects.get(username="operator"), User.objects.get(username="deputy")
    request, _ = four_eyes.request_operator_action(
        stopped_run, action="terminate", requested_by=operator, reason="duplicate")
    assert can_decide(deputy, request) and not can_decide(operator, request)
    assert Notification.objects.filter(request=request, recipient="deputy@example.com").exists()


@pytest.mark.parametrize(("groups", "lands_on"), [
    (("operators",), "/runs/"),
    (("finance-deputies",), "/approvals/"),
    ((), "/approvals/"),
])
def test_signing_in_lands_on_a_page_the_person_may_see(client, groups, lands_on):
    person("pat", *groups)
    response = client.post("/accounts/login/", {"username": "pat", "password": "pw"},
                           follow=True)
    assert response.status_code == 200
    assert response.redirect_chain[-1][0] == lands_on


def test_the_person_who_asked_is_told_four_eyes_is_why_they_may_not_decide(stopped_run,
                                                                         client):
    olga = person("olga", "operators", "approvers")
    request, _ = four_eyes.request_operator_action(
        stopped_run, action="terminate", requested_by=olga, reason="duplicate")
    client.force_login(olga)
    response = client.post(f"/approvals/{request.pk}/decide/",
                           {"decision": "approve", "decision_id": uuid.uuid4()})
    assert response.status_code == 403
    text = " ".join(response.content.decode().split())
    assert "another person decides it" in text and "approvers' group" not in text
    assert Run.objects.get(pk=stopped_run.pk).status == RunStatus.ATTENTION
