"""In a real browser: the runs list's Workflow filter naming no workflow the person may see
marks the Workflow field invalid, its error read with it, as the form's own refusals are.
Before, only the alert above the form said so: the field was not marked, and had no error."""

import re

import pytest
from playwright.sync_api import expect

from tests.console.test_browser import browser, make_user, sign_in  # noqa: F401
from tests.factories import new_run

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_workflow_no_name_contains_is_read_with_the_workflow_field(  # noqa: F811
        browser, live_server, roles):  # noqa: F811
    new_run()
    make_user("olga", "operators")
    page = sign_in(browser, live_server, "olga")
    page.goto(f"{live_server.url}/runs/?workflow=no-such-flow")

    field = page.get_by_role("textbox", name="Workflow")
    expect(field).to_have_attribute("aria-invalid", "true")
    expect(field).to_have_accessible_description(re.compile(
        r"^no workflow whose runs you may see has a name containing 'no-such-flow'"))
    expect(page.get_by_role("alert")).to_contain_text(
        "Invalid filter field workflow (Workflow): no workflow whose runs you may see")
    expect(page.locator("#run-rows tr[data-href]")).to_have_count(0)
