"""A request's "problem" names the addresses a notification failed to reach, and the mail
server's answer quotes them again. The run's page, its history and the request's page show
the problem to whoever may view the run or the request without any address, and so does the
request's admin page to a clerk who may view requests; the addresses are shown only to a
person who may see the notifications themselves (as Django admin's outbox asks:
approvals.view_notification). The request keeps them for that person."""

import html

import pytest
from django.contrib.auth.models import Group, Permission, User

from approvals import notifications, schedule
from approvals.models import ApprovalRequest
from audit.models import AuditRecord
from console.roles import ensure_roles
from tests.approvals.conftest import later, open_request, waiting_run

pytestmark = pytest.mark.django_db

ADDRESSES = ("ann@example.com", "bob@example.com")


@pytest.fixture
def failed_request(approvers, settings, t0):
    """test-approval-escalate, both notifications refused at their first attempt by a
    server quoting the address, then a reminder (which writes the problem to the run's
    history)."""
    request = open_request(waiting_run("test-approval-escalate"), t0)
    settings.EMAIL_BACKEND = "tests.approvals.backends.BouncingBackend"
    settings.APPROVALS_NOTIFICATION_MAX_ATTEMPTS = 1
    assert notifications.publish_notifications(now=t0).failed == 2
    assert schedule.send_reminders(now=later(t0, hours=8)) == 1
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    return ApprovalRequest.objects.get(pk=request.pk)


def _page(client, person, path) -> str:
    client.force_login(person)
    response = client.get(path)
    assert response.status_code == 200
    return html.unescape(response.content.decode())


@pytest.fixture
def auditor(db):
    ensure_roles(Group, Permission)
    person = User.objects.create_user("audrey")
    person.groups.add(Group.objects.get(name="auditors"))
    return person


def test_the_request_keeps_the_addresses_for_who_may_see_the_notifications(failed_request):
    assert all(f"notification to {a} failed" in failed_request.problem for a in ADDRESSES)
    assert "<ann@example.com>: unknown user" in failed_request.problem


def test_the_run_page_shows_a_viewer_the_problem_without_any_address(failed_request, auditor,
                                                                     client):
    page = _page(client, auditor, f"/runs/{failed_request.run_id}/")
    assert "notification to [an address] failed" in page
    assert "<[an address]>: unknown user" in page
    # Neither in the approvals table nor in the history's records of the request.
    assert "@example.com" not in page


def test_the_run_page_shows_the_addresses_to_who_may_see_the_notifications(failed_request,
                                                                           client):
    person = User.objects.create_user("nina")
    person.user_permissions.add(Permission.objects.get(codename="view_runs"),
                                Permission.objects.get(codename="view_notification"))
    page = _page(client, person, f"/runs/{failed_request.run_id}/")
    assert all(f"notification to {a} failed" in page for a in ADDRESSES)


def test_the_request_page_shows_an_approver_no_other_approvers_address(failed_request, bob,
                                                                       client):
    page = _page(client, bob, f"/approvals/{failed_request.pk}/")
    assert "notification to [an address] failed" in page
    assert "ann@example.com" not in page


def test_the_runs_history_keeps_the_problem_without_any_address(failed_request):
    records = AuditRecord.objects.filter(run_id=failed_request.run_id)
    problems = [r.data["problem"] for r in records if r.data.get("problem")]
    assert problems and all("notification to [an address] failed" in p for p in problems)
    assert not [r.pk for r in records if "@example.com" in str(r.data)]


def test_the_requests_admin_page_shows_the_addresses_only_to_who_may_see_the_notifications(
        failed_request, client):
    path = f"/admin/approvals/approvalrequest/{failed_request.pk}/change/"
    clerk = User.objects.create_user("clerk", is_staff=True)
    clerk.user_permissions.add(Permission.objects.get(codename="view_approvalrequest"))
    page = _page(client, clerk, path)
    assert "notification to [an address] failed" in page and "@example.com" not in page

    clerk.user_permissions.add(Permission.objects.get(codename="view_notification"))
    page = _page(client, User.objects.get(pk=clerk.pk), path)
    assert all(f"notification to {a} failed" in page for a in ADDRESSES)
