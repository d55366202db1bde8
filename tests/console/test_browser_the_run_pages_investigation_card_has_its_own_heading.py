"""In a real browser, as a screen reader lists a run page's headings: the investigation card
is a level-2 heading, 'Investigation card', and its sections (Facts, Inferences, Steps...)
sit under it. Before, its title was bold text in the <summary>, no heading: opened, its
sections were listed under the live part's last heading, 'Timeline'."""

import re

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from tests.console.test_browser import browser, sign_in, unsettled_run  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)
HEADING = re.compile(r'heading "(.*)" \[level=(\d)\]')


def test_the_cards_sections_sit_under_its_heading(browser, live_server,  # noqa: F811
                                                  unsettled_run):  # noqa: F811
    User.objects.create_superuser("root", password="pw-root")
    page = sign_in(browser, live_server, "root")
    page.goto(f"{live_server.url}/runs/{unsettled_run.pk}/")

    page.locator("#investigation-card summary").focus()
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Facts", level=3)).to_be_visible()

    found = [(int(level), text) for text, level
             in HEADING.findall(page.locator("body").aria_snapshot())]
    facts = found.index((3, "Facts"))
    assert found[facts - 1] == (2, "Investigation card"), found
    assert (2, "Timeline") in found[:facts - 1], found
    expect(page.get_by_role("region", name="Investigation card")).to_be_visible()
