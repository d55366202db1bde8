"""In a real browser: an action posted through htmx that the server refuses (the person
lost the permission after the page was drawn) says so in the dialog it was sent from, as
text, instead of failing silently (htmx swaps no 4xx answer)."""

import pytest
from playwright.sync_api import expect

from audit.models import AuditRecord
from runs.models import Run, RunStatus
from tests.console.test_browser import browser, make_user, sign_in, unsettled_run  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_refused_action_shows_the_refusal_in_its_dialog(browser, live_server,  # noqa: F811
                                                          unsettled_run):  # noqa: F811
    olga = make_user("olga", "operators")
    page = sign_in(browser, live_server, "olga")
    page.goto(f"{live_server.url}/runs/{unsettled_run.pk}/")
    page.locator("#action-terminate").click()
    dialog = page.locator("#dialog-terminate")
    expect(dialog).to_be_visible()
    dialog.get_by_label("Reason (required)").fill("customer cancelled")
    olga.groups.clear()  # the permission is gone by the time the form is sent
    dialog.locator("button[type=submit]").click()
    alert = dialog.get_by_role("alert")
    expect(alert).to_contain_text("The server refused (403): You may not terminate this run.")
    assert alert.locator("*").count() == 0  # text, never markup
    assert Run.objects.get(pk=unsettled_run.pk).status == RunStatus.ATTENTION
    assert not AuditRecord.objects.filter(run=unsettled_run, action="terminated").exists()
