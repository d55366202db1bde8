"""In a real browser, keyboard alone: an action sent from its dialog on a run's page
replaces the part of the page the dialog was in; the focus goes to the message saying what
became of the action, refused or done (it fell to the page's body, where nothing was read
out and the next Tab started from the top of the page)."""

import pytest
from playwright.sync_api import expect

from audit.models import AuditRecord
from tests.console.test_browser import browser, make_user, sign_in, unsettled_run  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_result_of_an_action_takes_the_focus(browser, live_server,  # noqa: F811
                                                 unsettled_run):  # noqa: F811
    make_user("olga", "operators")
    page = sign_in(browser, live_server, "olga")
    page.goto(f"{live_server.url}/runs/{unsettled_run.pk}/")

    opener = page.get_by_role("button", name="Terminate…")
    opener.focus()
    page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog", name=f"Terminate run #{unsettled_run.pk}")
    reason = dialog.get_by_role("textbox", name="Reason (required)")
    expect(reason).to_be_focused()
    page.keyboard.type("duplicate order")
    # The run moved on since the page was drawn (as another person's action would make
    # it): refused by the server, told in the part's messages. (A field's text refused is
    # told at the field: test_browser_a_refused_reason_keeps_its_dialog_...)
    dialog.locator("input[name=seen]").evaluate("(e) => { e.value = '0'; }")
    dialog.get_by_role("button", name="Terminate", exact=True).focus()
    page.keyboard.press("Enter")
    said = page.locator("#run-live .messages")
    expect(said).to_contain_text("Terminate was not done")
    expect(said).to_be_focused()

    page.get_by_role("button", name="Terminate…").focus()
    page.keyboard.press("Enter")
    page.keyboard.type("duplicate order")
    dialog.get_by_role("button", name="Terminate", exact=True).focus()
    page.keyboard.press("Enter")
    expect(said).not_to_contain_text("was not done")
    expect(said).to_be_focused()
    assert AuditRecord.objects.filter(run=unsettled_run, actor_label="olga").exists()
