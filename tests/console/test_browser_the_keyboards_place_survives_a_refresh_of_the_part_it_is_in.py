"""In a real browser, keyboard alone: the runs list refreshes its rows every few seconds
and a run's page its live part when the run changes; the link the keyboard was on keeps
the focus across the swap (it fell to the page's body, and the next Tab started again
from the top of the page)."""

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from runs.models import RunStatus
from tests.console.test_browser import browser, make_user, sign_in  # noqa: F401
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_focused_link_keeps_the_focus_when_its_part_is_swapped(browser,  # noqa: F811
                                                                  live_server, roles):
    run = new_run(wake=False)
    make_user("olga", "operators")
    page = sign_in(browser, live_server, "olga")
    page.reload()  # the run exists before the list is drawn

    page.keyboard.press("j")  # onto the first row: its link has the focus
    link = page.get_by_role("link", name=f"#{run.pk}", exact=True)
    expect(link).to_be_focused()
    place(run, status=RunStatus.ATTENTION, attention_reason="permanent_error",
          updated_at=timezone.now())
    row = page.locator(f'#run-rows tr[data-href$="/runs/{run.pk}/"]')
    expect(row).to_contain_text("attention", timeout=15_000)  # the rows were swapped
    expect(link).to_be_focused()

    page.goto(f"{live_server.url}/runs/{run.pk}/")
    workflow = page.locator("#run-live").get_by_role("link", name="test-orders")
    workflow.focus()
    place(run, status=RunStatus.WAITING, updated_at=timezone.now())
    expect(page.locator("#run-live h1")).to_contain_text("waiting", timeout=15_000)
    expect(workflow).to_be_focused()
    # The next Tab goes on from there, not from the top of the page.
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.closest('#run-live') !== null")
