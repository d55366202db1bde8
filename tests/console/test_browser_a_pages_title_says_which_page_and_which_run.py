"""In a real browser, as a screen reader announces a page or a tab: the title of an
approval request says which run it is about (it said "Approval request 1" alone, the same
for every run), and that the decision was not recorded when the form was refused; a
workflow's page says it is a workflow's (its title was the bare name)."""

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from approvals.models import ApprovalRequest
from approvals.requests import open_pending_requests
from runs.execution import executor
from tests.console.test_browser import browser, sign_in  # noqa: F401
from tests.factories import new_run

pytestmark = pytest.mark.django_db(transaction=True)


def test_titles_say_which_page_and_which_run(browser, live_server, roles,  # noqa: F811
                                             script):
    User.objects.create_superuser("root", password="pw-root")
    run = new_run("test-approval")
    executor.advance_run(run.pk, worker="w1")
    assert open_pending_requests() == 1
    request = ApprovalRequest.objects.get()
    page = sign_in(browser, live_server, "root")

    page.goto(f"{live_server.url}/approvals/{request.pk}/")
    expect(page).to_have_title(
        f"Approval request {request.pk}, run #{run.pk} (test-approval) · Durable workflows")
    page.get_by_role("button", name="Reject").click()  # no comment: refused
    expect(page).to_have_title(f"Not recorded: Approval request {request.pk}, run #{run.pk} "
                               "(test-approval) · Durable workflows")

    page.goto(f"{live_server.url}/runs/{run.pk}/")
    expect(page).to_have_title(f"Run #{run.pk} · Durable workflows")
    page.goto(f"{live_server.url}/workflows/test-approval/")
    expect(page).to_have_title("Workflow test-approval · Durable workflows")
