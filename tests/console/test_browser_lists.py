"""The lists in a real browser under the production Content-Security-Policy (the browser
fixture of test_browser fails a test on any violation): the keyboard shortcuts and their
help overlay, the skip link, and a run that enters attention appearing as "1 new — show"
on a page nobody reloads, and the runs a person ticked staying ticked while the list
refreshes itself."""

import pytest
from django.contrib.auth.models import Group, User
from django.utils import timezone
from playwright.sync_api import expect

from runs.models import RunStatus
from tests.console import test_browser
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db(transaction=True)
browser = test_browser.browser


def _sign_in_as_operator(browser, live_server):
    User.objects.create_user("olga", password="pw-olga").groups.add(
        Group.objects.get(name="operators"))
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill("olga")
    page.get_by_label("Password").fill("pw-olga")
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/runs/")
    return page


def test_keyboard_shortcuts_move_open_search_and_go_to_attention(browser, live_server, roles):
    runs = [new_run() for _ in range(3)]
    page = _sign_in_as_operator(browser, live_server)
    page.reload()  # the runs exist before the list is drawn

    # The first Tab reaches the skip link, which jumps past the navigation.
    page.keyboard.press("Tab")
    skip = page.get_by_role("link", name="Skip to content")
    expect(skip).to_be_focused()
    expect(skip).to_be_visible()
    page.keyboard.press("Enter")
    expect(page.locator("main#main")).to_be_focused()

    help_dialog = page.locator("#shortcuts-help")
    page.keyboard.press("?")
    expect(help_dialog).to_be_visible()
    expect(help_dialog).to_contain_text("go to Attention")
    page.keyboard.press("Escape")
    expect(help_dialog).to_be_hidden()

    rows = page.locator("#run-rows tr[data-href]")
    newest_first = [r.pk for r in reversed(runs)]
    page.keyboard.press("j")
    expect(rows.nth(0)).to_have_class("current")
    page.keyboard.press("j")
    page.keyboard.press("j")
    page.keyboard.press("k")
    expect(rows.nth(1)).to_have_class("current")
    expect(page.get_by_role("link", name=f"#{newest_first[1]}", exact=True)).to_be_focused()
    page.keyboard.press("o")
    page.wait_for_url(f"**/runs/{newest_first[1]}/")

    page.keyboard.press("g")
    page.keyboard.press("a")
    page.wait_for_url("**/attention/")
    page.keyboard.press("/")
    page.wait_for_url("**/runs/?focus=search")
    expect(page.locator("#id_q")).to_be_focused()
    # Typed into the search box, the keys are text, not shortcuts.
    page.keyboard.type("g a j")
    expect(page.locator("#id_q")).to_have_value("g a j")
    assert page.url.endswith("/runs/?focus=search")


def test_a_run_entering_attention_shows_as_new_without_a_reload(browser, live_server, roles):
    page = _sign_in_as_operator(browser, live_server)
    page.goto(f"{live_server.url}/attention/")
    bar = page.locator("#new-runs")
    expect(bar).not_to_contain_text("new")
    run = place(new_run(), status=RunStatus.ATTENTION, attention_reason="permanent_error",
                updated_at=timezone.now())
    expect(bar.get_by_role("link", name="1 new — show")).to_be_visible(timeout=15_000)
    bar.get_by_role("link", name="1 new — show").click()
    expect(page.get_by_role("link", name=f"#{run.pk}", exact=True)).to_be_visible()

    # The runs list filtered to runs in attention does the same.
    page.goto(f"{live_server.url}/runs/?attention=on")
    second = place(new_run(), status=RunStatus.ATTENTION, attention_reason="permanent_error",
                   updated_at=timezone.now())
    page.locator("#new-runs").get_by_role("link", name="1 new — show").click(timeout=15_000)
    expect(page.get_by_role("link", name=f"#{second.pk}", exact=True)).to_be_visible()
    assert "attention=on" in page.url


def test_ticked_runs_stay_ticked_while_the_list_refreshes_itself(browser, live_server, roles):
    first, second = new_run(wake=False), new_run(wake=False)
    page = _sign_in_as_operator(browser, live_server)
    page.reload()
    page.get_by_label(f"Select run {first.pk}").check()
    # The rows are fetched again every 5 s: the change shows once they were swapped.
    place(first, status=RunStatus.ATTENTION, attention_reason="permanent_error",
          updated_at=timezone.now())
    row = page.locator(f'#run-rows tr[data-href$="/runs/{first.pk}/"]')
    expect(row).to_contain_text("attention", timeout=15_000)
    expect(page.get_by_label(f"Select run {first.pk}")).to_be_checked()
    expect(page.get_by_label(f"Select run {second.pk}")).not_to_be_checked()
