"""In a real browser, keyboard alone: a run action's reason the server refuses (only
blanks) leaves the dialog open with what was typed, the Reason field marked invalid and its
error read with it. Before, the answer swapped the dialog away: the typed text was lost and
the error sat in the page's messages, tied to no field."""

import re

import pytest
from playwright.sync_api import expect

from audit.models import AuditRecord
from runs.models import Run, RunStatus
from tests.console.test_browser import browser, make_user, sign_in, unsettled_run  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_reason_of_blanks_is_refused_in_its_dialog(browser, live_server,  # noqa: F811
                                                     unsettled_run):  # noqa: F811
    make_user("olga", "operators")
    page = sign_in(browser, live_server, "olga")
    page.goto(f"{live_server.url}/runs/{unsettled_run.pk}/")

    page.get_by_role("button", name="Terminate…").focus()
    page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog", name=f"Terminate run #{unsettled_run.pk}")
    reason = dialog.get_by_role("textbox", name="Reason (required)")
    expect(reason).to_be_focused()
    page.keyboard.type("    ")
    dialog.get_by_role("button", name="Terminate", exact=True).focus()
    page.keyboard.press("Enter")

    expect(reason).to_have_attribute("aria-invalid", "true")
    expect(reason).to_have_accessible_description(
        re.compile(r"^Terminate needs a reason"))
    expect(reason).to_be_focused()
    expect(dialog).to_be_visible()
    expect(reason).to_have_value("    ")  # what was typed is kept
    assert Run.objects.get(pk=unsettled_run.pk).status == RunStatus.ATTENTION
    assert not AuditRecord.objects.filter(run=unsettled_run, action="terminated").exists()

    # Corrected in place, the action is sent and the dialog goes with the part it sat in.
    page.keyboard.type("duplicate order")
    dialog.get_by_role("button", name="Terminate", exact=True).focus()
    page.keyboard.press("Enter")
    said = page.locator("#run-live .messages")
    expect(said).not_to_contain_text("was not done")
    expect(said).to_be_focused()
    assert AuditRecord.objects.filter(run=unsettled_run, actor_label="olga").exists()
