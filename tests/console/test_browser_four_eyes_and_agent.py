"""In a real browser, under the production Content-Security-Policy: an operator's terminate
of a run whose high-impact step took effect waits for a second person, and another operator
completes it from the run page's link to the request; whoever may not see runs lands on a
page they may see after signing in; an agent step's page shows its conversation."""

import pytest
from django.contrib.auth.models import Group, User
from playwright.sync_api import expect

from runs.execution import executor
from runs.models import Run, RunStatus
from tests.console.test_agent_conversation_page import agent_run
from tests.console.test_browser import (  # noqa: F401
    SCREENSHOTS,
    browser,
    make_user,
    sign_in,
    unsettled_run,
)
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def ledger_posted_run(roles, script):
    """A test-orders run in attention after its high-impact post-ledger step succeeded."""
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    return place(run, status=RunStatus.ATTENTION, attention_reason="reopened")


def test_a_second_operator_completes_a_four_eyes_terminate(browser, live_server,  # noqa: F811
                                                           ledger_posted_run):
    for name in ("olga", "omar"):
        make_user(name, "operators")
        User.objects.filter(username=name).update(email=f"{name}@example.com")
    page = sign_in(browser, live_server, "olga")
    page.goto(f"{live_server.url}/runs/{ledger_posted_run.pk}/")
    page.get_by_role("button", name="Terminate…").click()
    dialog = page.locator("#dialog-terminate")
    dialog.get_by_label("Reason").fill("duplicate of another order")
    dialog.get_by_role("button", name="Terminate", exact=True).click()
    expect(page.locator(".messages")).to_contain_text("second person")
    assert Run.objects.get(pk=ledger_posted_run.pk).status == RunStatus.ATTENTION

    second = sign_in(browser, live_server, "omar")
    second.goto(f"{live_server.url}/runs/{ledger_posted_run.pk}/")
    # The run page links its approval request; the other operator may decide it.
    second.locator('#run-live a[href^="/approvals/"]').first.click()
    expect(second.get_by_role("button", name="Approve")).to_be_visible()
    second.get_by_label("Comment").fill("checked: it is a duplicate")
    second.get_by_role("button", name="Approve").click()
    expect(second.get_by_text("Your decision (approved) is recorded.")).to_be_visible()
    second.screenshot(path=str(SCREENSHOTS / "four-eyes-second-operator.png"), full_page=True)
    assert Run.objects.get(pk=ledger_posted_run.pk).status == RunStatus.TERMINATED


def test_signing_in_without_access_to_runs_lands_on_the_approvals_inbox(
        browser, live_server, roles):  # noqa: F811
    user = User.objects.create_user("dora", password="pw-dora")
    user.groups.add(Group.objects.get_or_create(name="finance-deputies")[0])
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    response_codes = []
    page.on("response", lambda r: response_codes.append(r.status)
            if r.request.resource_type == "document" else None)
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill("dora")
    page.get_by_label("Password").fill("pw-dora")
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/approvals/")
    assert 403 not in response_codes


def test_an_agent_step_shows_its_conversation(browser, live_server, roles):  # noqa: F811
    make_user("olga", "operators")
    run = agent_run(3, content="Reading invoice INV-2001 first.")
    page = sign_in(browser, live_server, "olga")
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    prompt = page.locator("details.system-prompt")
    expect(prompt).to_contain_text("System prompt")
    prompt.locator("summary").click()
    expect(prompt).to_contain_text("You triage supplier invoices.")
    turns = page.locator("tr.model-turn")
    expect(turns).to_have_count(3)
    expect(turns.first).to_contain_text("100 prompt + 7 completion tokens")
    expect(turns.first).to_contain_text("Reading invoice INV-2001 first.")
    conversation = page.locator("table.agent-conversation")
    expect(conversation).to_contain_text("[redacted]")
    expect(conversation).not_to_contain_text("DE89370400440532013000")
    page.screenshot(path=str(SCREENSHOTS / "agent-conversation.png"), full_page=True)


def test_the_reconcile_dialog_s_step_selector_stays_inside_it(browser, live_server,  # noqa: F811
                                                              unsettled_run):  # noqa: F811
    make_user("olga", "operators")
    page = sign_in(browser, live_server, "olga")
    page.set_viewport_size({"width": 420, "height": 900})
    page.goto(f"{live_server.url}/runs/{unsettled_run.pk}/")
    page.locator("#recommended-reconcile").click()
    dialog = page.locator("#dialog-reconcile")
    expect(dialog).to_be_visible()
    # The recommended step is the one chosen, and its long option text does not widen it.
    expect(dialog.locator("select[name=step]")).to_have_value("post-ledger")
    assert dialog.evaluate("d => d.scrollWidth <= d.clientWidth")
    box, select = dialog.bounding_box(), dialog.locator("select[name=step]").bounding_box()
    assert select["x"] + select["width"] <= box["x"] + box["width"]
    # The favicon the pages link to is served.
    assert page.request.get(f"{live_server.url}/favicon.ico").status == 200
