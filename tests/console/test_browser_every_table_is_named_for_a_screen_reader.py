"""In a real browser, as a screen reader lists them: every table on the pages an operator or
an approver uses has a name (its heading, or what it lists), so "table, Steps" can be told
from "table, Timeline"; its headers are column headers; a step's status is text, not a
colour. Before, every one of them was a nameless "table"."""

import re

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from tests.console.test_agent_conversation_page import agent_run
from tests.console.test_browser import browser, sign_in, unsettled_run  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)
# A table in Playwright's ARIA snapshot with no name after its role.
NAMELESS_TABLE = re.compile(r"^\s*- table(:|$)", re.MULTILINE)


def test_every_table_has_a_name(browser, live_server, unsettled_run):  # noqa: F811
    User.objects.create_superuser("root", password="pw-root")
    agent = agent_run(2, content="Reading the invoice first.")
    page = sign_in(browser, live_server, "root")

    page.goto(f"{live_server.url}/runs/{unsettled_run.pk}/")
    steps = page.get_by_role("table", name="Steps", exact=True)
    ledger = steps.get_by_role("row").filter(has_text="post-ledger")
    expect(ledger.get_by_role("cell", name="unknown", exact=True)).to_be_visible()
    expect(steps.get_by_role("columnheader", name="Status")).to_be_visible()
    expect(page.get_by_role("table", name="Timeline", exact=True)).to_be_visible()

    for path in ("/runs/", "/attention/", f"/runs/{unsettled_run.pk}/", f"/runs/{agent.pk}/",
                 f"/runs/{unsettled_run.pk}/investigation/", "/audit/", "/audit/?log=access",
                 "/workers/", "/schedules/", "/workflows/test-orders/", "/approvals/"):
        page.goto(f"{live_server.url}{path}")
        # The keyboard shortcuts' table is in every page, in its dialog.
        page.keyboard.press("?")
        snapshot = page.locator("body").aria_snapshot()
        assert page.get_by_role("table").count() >= 1, path
        assert not NAMELESS_TABLE.search(snapshot), f"{path}:\n{snapshot}"
        expect(page.get_by_role("table", name="Keyboard shortcuts")).to_be_visible()
