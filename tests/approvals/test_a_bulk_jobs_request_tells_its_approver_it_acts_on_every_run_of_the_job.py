"""A bulk job's four-eyes request hangs on one of the job's runs, and approving it acts on
every run of the job that waited for a second person. Its approver was told of the one run:
the mail's subject and first line read "terminate of run 1 (test-orders order-1)", the inbox
and the request page named that run alone, and "What the action will do" explained the
action on that run, closing with a sentence meant for the person who asks ("your request
goes to a second person"). Each now says how many runs the approval acts on, and what
becomes of them."""

import html
import re

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.urls import reverse

from approvals import four_eyes
from approvals.models import ApprovalRequest, Notification
from console.roles import ensure_roles
from tests.approvals.bulk_requests import bulk_terminate, run_with_an_effect

pytestmark = pytest.mark.django_db


@pytest.fixture
def people(db):
    """olga decides, carl asks."""
    ensure_roles(Group, Permission)
    olga = User.objects.create_user("olga", email="olga@example.com")
    carl = User.objects.create_user("carl", email="carl@example.com")
    for user in (olga, carl):
        user.groups.add(Group.objects.get(name="operators"))
    return olga, carl


def _text(response) -> str:
    assert response.status_code == 200
    main = response.content.decode().split("<main", 1)[1]
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", main)).split())


def test_the_mail_the_inbox_and_the_page_say_the_approval_acts_on_every_run(people, client):
    olga, carl = people
    runs = [run_with_an_effect(), run_with_an_effect(), run_with_an_effect()]
    job = bulk_terminate(user=carl)
    request = ApprovalRequest.objects.get(pk=job.approval_id)
    asked = f"terminate of 3 runs (bulk job {job.pk})"

    note = Notification.objects.get(request=request, user=olga)
    assert note.subject == f"approval needed: {asked}"
    assert note.body.splitlines()[0] == f"Your decision is needed: {asked}."
    assert f"of run {runs[0].pk}" not in note.subject + note.body

    client.force_login(olga)
    inbox = _text(client.get(reverse("approvals:inbox")))
    assert f"operator action: {asked}" in inbox
    assert runs[0].business_key not in inbox

    page = _text(client.get(reverse("approvals:detail", kwargs={"pk": request.pk})))
    assert f"3 runs of bulk job {job.pk}" in page
    follows = page.split("What the action will do", 1)[1].split("Your decision", 1)[0]
    assert "Approved: terminate is taken on each of the 3 runs listed, as carl asked" in follows
    assert "Rejected: none of the runs is touched." in follows
    assert "your request goes to a second person" not in follows


def test_a_request_for_one_run_still_names_that_run(people, client):
    olga, carl = people
    run = run_with_an_effect()
    request, _ = four_eyes.request_operator_action(run, action="terminate",
                                                   requested_by=carl, reason="duplicate")
    note = Notification.objects.get(request=request, user=olga)
    assert note.subject.startswith(f"approval needed: terminate of run {run.pk} (")
    client.force_login(olga)
    assert run.business_key in _text(client.get(reverse("approvals:inbox")))
    page = _text(client.get(reverse("approvals:detail", kwargs={"pk": request.pk})))
    assert f"Run {run.pk} · test-orders · {run.business_key}" in page
    assert "Ends the run now." in page
