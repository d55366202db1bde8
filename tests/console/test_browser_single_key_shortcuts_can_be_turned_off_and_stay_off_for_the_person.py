"""In a real browser, keyboard alone (WCAG 2.1.4): the single-key shortcuts (j, k, o, /, g,
?) can be turned off from their help dialog, which says so; turned off, the keys do nothing,
and they stay off across pages for the person who turned them off, in that browser, while
another person signing in there has them on. Before, nothing turned them off."""

import pytest
from playwright.sync_api import expect

from tests.console.test_browser import browser, make_user  # noqa: F401
from tests.factories import new_run

pytestmark = pytest.mark.django_db(transaction=True)


def _sign_in(page, live_server, name):
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill(name)
    page.get_by_label("Password").fill("pw-" + name)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/runs/")


def test_the_shortcuts_turned_off_do_nothing_and_stay_off(browser, live_server,  # noqa: F811
                                                          roles):
    new_run()
    make_user("olga", "operators")
    make_user("omar", "operators")
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    _sign_in(page, live_server, "olga")
    rows = page.locator("#run-rows tr[data-href]")
    help_dialog = page.get_by_role("dialog", name="Keyboard shortcuts")

    page.keyboard.press("?")
    expect(help_dialog).to_be_visible()
    toggle = help_dialog.get_by_role("checkbox", name="Single-key shortcuts on")
    expect(toggle).to_be_checked()
    toggle.focus()
    page.keyboard.press("Space")
    expect(toggle).not_to_be_checked()
    page.keyboard.press("Escape")
    expect(help_dialog).to_be_hidden()

    page.locator("main#main").focus()
    page.keyboard.press("j")
    page.keyboard.press("?")
    expect(help_dialog).to_be_hidden()
    expect(rows.first).not_to_have_class("current")

    # Another page, the same person: still off.
    page.goto(f"{live_server.url}/attention/")
    page.locator("main#main").focus()
    page.keyboard.press("?")
    page.keyboard.press("g")
    page.keyboard.press("r")
    expect(help_dialog).to_be_hidden()
    assert page.url.endswith("/attention/")
    page.get_by_role("button", name="Keyboard shortcuts").click()
    expect(help_dialog.get_by_role("checkbox", name="Single-key shortcuts on")
           ).not_to_be_checked()
    page.keyboard.press("Escape")

    # Another person in the same browser has them on.
    page.get_by_role("button", name="Sign out").click()
    _sign_in(page, live_server, "omar")
    page.locator("main#main").focus()
    page.keyboard.press("j")
    expect(rows.first).to_have_class("current")
