"""In a real browser, as a screen reader meets them: a field the server refused is marked
invalid and its error is the field's description (aria-describedby names an element that
exists), on the approval decision page and on the runs and audit filters."""

import re

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from approvals.models import ApprovalRequest
from approvals.requests import open_pending_requests
from runs.execution import executor
from tests.console.test_browser import browser, sign_in  # noqa: F401
from tests.factories import new_run, step

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_refused_field_is_described_by_its_error(browser, live_server,  # noqa: F811
                                                   roles, script):
    User.objects.create_superuser("root", password="pw-root")
    run = new_run("test-approval")
    executor.advance_run(run.pk, worker="w1")
    assert open_pending_requests() == 1
    page = sign_in(browser, live_server, "root")

    page.goto(f"{live_server.url}/approvals/{ApprovalRequest.objects.get().pk}/")
    page.get_by_role("button", name="Reject").click()  # a rejection needs a comment
    comment = page.get_by_role("textbox", name="Comment")
    expect(comment).to_have_attribute("aria-invalid", "true")
    expect(comment).to_have_accessible_description(
        "The comment is missing: a rejection needs one. Say why you reject it.")
    assert step(run, "approve").status == "waiting"

    page.goto(f"{live_server.url}/runs/?status=nope")
    status = page.locator("#id_status")
    expect(status).to_have_attribute("aria-invalid", "true")
    expect(status).to_have_accessible_description(re.compile(r"^status: no status 'nope'; "))

    page.goto(f"{live_server.url}/audit/?run=abc")
    expect(page.locator("#id_run")).to_have_accessible_description(
        re.compile(r"\S"))
