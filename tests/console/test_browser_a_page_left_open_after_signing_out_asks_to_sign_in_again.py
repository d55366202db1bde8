"""In a real browser: a run's page left open while the session ended. The action sent from
its dialog says, in the dialog, that nothing was changed (the page is not replaced by a
sign-in page inside it), and once the dialog is closed the page's poll takes the browser to
sign in and, signed in, back to the run."""

import re

import pytest
from django.contrib.sessions.models import Session
from playwright.sync_api import expect

from audit.models import AuditRecord
from runs.models import Run, RunStatus
from tests.console.test_browser import browser, make_user, sign_in, unsettled_run  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_action_after_the_session_ended_says_so_and_the_page_asks_to_sign_in(
        browser, live_server, unsettled_run):  # noqa: F811
    make_user("olga", "operators")
    page = sign_in(browser, live_server, "olga")
    run_page = f"{live_server.url}/runs/{unsettled_run.pk}/"
    page.goto(run_page)
    page.locator("#action-terminate").click()
    dialog = page.locator("#dialog-terminate")
    dialog.get_by_label("Reason (required)").fill("customer cancelled")
    Session.objects.all().delete()  # signed out meanwhile
    dialog.locator("button[type=submit]").click()
    alert = dialog.get_by_role("alert")
    expect(alert).to_contain_text("The server refused (401): You are signed out")
    expect(alert).to_contain_text("nothing was changed")
    expect(page.locator("main")).to_have_count(1)
    expect(dialog.get_by_label("Reason (required)")).to_have_value("customer cancelled")
    assert Run.objects.get(pk=unsettled_run.pk).status == RunStatus.ATTENTION
    assert not AuditRecord.objects.filter(run=unsettled_run, action="terminated").exists()

    dialog.get_by_role("button", name="Cancel").click()
    # The live part's next poll.
    page.wait_for_url(re.compile(r"/accounts/login/\?next="), timeout=15000)
    page.get_by_label("Username").fill("olga")
    page.get_by_label("Password").fill("pw-olga")
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(run_page)
    expect(page.locator("#run-live h1")).to_contain_text(f"Run #{unsettled_run.pk}")
