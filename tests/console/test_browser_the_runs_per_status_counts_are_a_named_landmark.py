"""In a real browser, as a screen reader meets it: the runs list's counts per status are a
landmark named 'Runs per status', holding a link per status with its count. Before, the name
sat on a plain div, which has no role: screen readers ignore such a name, and the links read
as loose links between the heading and the filter."""

import pytest
from playwright.sync_api import expect

from tests.console.test_browser import browser, make_user, sign_in  # noqa: F401
from tests.factories import new_run

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_counts_per_status_are_found_by_their_name(browser, live_server,  # noqa: F811
                                                       roles):
    new_run()
    make_user("olga", "operators")
    page = sign_in(browser, live_server, "olga")

    counts = page.get_by_role("navigation", name="Runs per status")
    expect(counts).to_have_count(1)
    expect(counts.get_by_role("link", name="queued 1")).to_have_attribute(
        "href", "?status=queued")
    tree = page.locator("body").aria_snapshot()
    assert 'navigation "Runs per status"' in tree, tree
