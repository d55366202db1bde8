"""In a real browser: a sign-in refused (a wrong password) marks both fields invalid and
gives them the refusal as their description, so a screen reader on either field hears
'invalid' and why. Before, the alert stood alone above the form, tied to no field."""

import pytest
from playwright.sync_api import expect

from tests.console.test_browser import browser, make_user  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_wrong_password_is_read_with_both_fields(browser, live_server, roles):  # noqa: F811
    make_user("olga", "operators")
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{live_server.url}/accounts/login/")
    username, password = page.get_by_label("Username"), page.get_by_label("Password")
    expect(username).not_to_have_attribute("aria-invalid", "true")
    username.fill("olga")
    password.fill("not her password")
    page.get_by_role("button", name="Sign in").click()

    expect(page.get_by_role("alert")).to_have_text("Your username and password didn't match.")
    for field in (page.get_by_role("textbox", name="Username"), password):
        expect(field).to_have_attribute("aria-invalid", "true")
        expect(field).to_have_accessible_description("Your username and password didn't match.")
    expect(username).to_have_value("olga")

    # Corrected, the same form signs in.
    password.fill("pw-olga")
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/runs/")
