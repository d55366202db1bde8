"""In a real browser, as a screen reader hears it: a run's page swaps its live part in when
the run changes, and a change of the run's status is said in the page's status region
("Run #1 is now attention: permanent error."). Before, the header's badge changed
silently: a person who cannot see the page was not told the run now needs them."""

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from runs.models import Run, RunStatus
from tests.console.test_browser import browser, make_user, sign_in  # noqa: F401
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_run_entering_attention_is_said(browser, live_server, roles):  # noqa: F811
    run = new_run(wake=False)
    make_user("olga", "operators")
    page = sign_in(browser, live_server, "olga")
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    said = page.get_by_role("status").filter(has_text=f"Run #{run.pk} is now")
    expect(said).to_have_count(0)

    place(run, status=RunStatus.ATTENTION, attention_reason="permanent_error",
          updated_at=timezone.now())
    expect(page.locator("#run-live h1")).to_contain_text("attention", timeout=15_000)
    reason = Run(attention_reason="permanent_error").get_attention_reason_display()
    expect(said).to_have_text(f"Run #{run.pk} is now attention: {reason}.")
