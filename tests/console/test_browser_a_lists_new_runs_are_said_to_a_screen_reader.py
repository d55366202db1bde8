"""In a real browser, as a screen reader hears it: the "N new — show" bar of the runs list
and the attention list is swapped in every 5 s; when the number of new runs changes, the
page's status region says so. The bar carried role=status itself, but each swap put a new
region in the page, which screen readers do not follow: the news was not read out."""

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from runs.models import RunStatus
from tests.console.test_browser import browser, make_user, sign_in  # noqa: F401
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_run_entering_attention_is_said_on_the_attention_list(browser,  # noqa: F811
                                                                live_server, roles):
    make_user("olga", "operators")
    page = sign_in(browser, live_server, "olga")
    page.goto(f"{live_server.url}/attention/")
    said = page.locator("#live-said")
    place(new_run(), status=RunStatus.ATTENTION, attention_reason="permanent_error",
          updated_at=timezone.now())
    expect(page.get_by_role("link", name="1 new — show")).to_be_visible(timeout=15_000)
    expect(said).to_have_text("1 new run since the list was drawn.")
    expect(said).to_have_role("status")
