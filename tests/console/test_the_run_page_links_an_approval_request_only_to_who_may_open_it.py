"""The run page lists the run's approval requests to whoever may view the run, and links
each only for those who may open it: its approvers and the person who asked for it. An
auditor sees the row (what was asked, its state, who decided) without a link that would
answer "Not found" (as for a request that does not exist); the live refresh of the page says
the same."""

import pytest
from django.contrib.auth.models import Group, User
from django.urls import reverse

from approvals.four_eyes import request_operator_action
from runs.models import RunStatus, StepStatus
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


@pytest.fixture
def asked(operator):
    run = place(new_run(), status=RunStatus.ATTENTION,
                step_statuses={"create-task": StepStatus.SUCCEEDED,
                               "post-ledger": StepStatus.SUCCEEDED})
    approval, created = request_operator_action(run, action="terminate", requested_by=operator,
                                                reason="customer fraud")
    assert created
    return run, approval


def _pages(client, run):
    page = client.get(reverse("console:run", args=[run.pk]))
    live = client.get(reverse("console:run", args=[run.pk]), {"part": "live"},
                      HTTP_HX_REQUEST="true")
    assert page.status_code == 200 and live.status_code == 200
    return page.content.decode(), live.content.decode()


def test_the_requester_and_an_approver_are_linked_to_the_request(client_for, operator, asked):
    run, approval = asked
    carl = User.objects.create_user("carl", password="pw")
    carl.groups.add(Group.objects.get(name="operators"))
    link = f'href="{reverse("approvals:detail", args=[approval.pk])}"'
    for person in (operator, carl):
        page, _ = _pages(client_for(person), run)
        assert link in page, person.username
        assert client_for(person).get(
            reverse("approvals:detail", args=[approval.pk])).status_code == 200


def test_an_auditor_sees_the_request_without_a_link_to_a_page_they_may_not_open(
        client_for, auditor, asked):
    run, approval = asked
    client = client_for(auditor)
    for html in _pages(client, run):
        assert f"(request #{approval.pk})" in html
        assert reverse("approvals:detail", args=[approval.pk]) not in html
    assert client.get(reverse("approvals:detail", args=[approval.pk])).status_code == 404
