"""In a real browser: on the page of a run in attention (polled every 5 s), a recovery
contract the person opened stays open across the polls while the run is unchanged; it was
swapped shut at every poll. Once the run changes, the poll shows its new state."""

import pytest
from playwright.sync_api import expect

from runs.models import Run, RunStatus
from tests.console.test_browser import browser, make_user, sign_in, unsettled_run  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def _is_poll(response) -> bool:
    return "part=live" in response.url


def test_an_opened_recovery_contract_stays_open_across_polls(browser, live_server,  # noqa: F811
                                                             unsettled_run):  # noqa: F811
    make_user("olga", "operators")
    page = sign_in(browser, live_server, "olga")
    page.goto(f"{live_server.url}/runs/{unsettled_run.pk}/")
    contract = page.locator("#run-live details").first
    contract.locator("summary").click()
    expect(contract).to_have_attribute("open", "")
    for _ in range(2):
        with page.expect_response(_is_poll, timeout=15000) as polled:
            pass
        assert polled.value.status == 204
    expect(contract).to_have_attribute("open", "")

    Run.objects.filter(pk=unsettled_run.pk).update(status=RunStatus.QUEUED)
    with page.expect_response(_is_poll, timeout=15000) as polled:
        pass
    assert polled.value.status == 200
    expect(page.locator("#run-live h1 .badge")).to_have_text("queued")
