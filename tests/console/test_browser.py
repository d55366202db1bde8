"""The console in a real browser (Playwright driving the system Chromium): an operator
reconciles a run in attention; an auditor sees no action and a forged POST is refused.
Every page runs under the production Content-Security-Policy, and a test fails on any
violation a page reports. Screenshots of the list and detail pages go to var/screenshots/."""

import pytest
from django.conf import settings
from django.contrib.auth.models import Group, User
from django.db import connections
from playwright.sync_api import expect, sync_playwright

from audit.models import AuditRecord
from console.content_security import POLICY
from runs.execution import executor
from runs.machine.errors import UnknownOutcome
from runs.models import Run, RunStatus
from tests.factories import new_run, step

pytestmark = pytest.mark.django_db(transaction=True)
SCREENSHOTS = settings.BASE_DIR / "var" / "screenshots"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]


# Runs in every page before its own scripts; bindings and init scripts are not subject to
# the page's policy, so a violation is reported even when the policy blocks everything else.
REPORT_VIOLATIONS = """
document.addEventListener("securitypolicyviolation", (e) => {
  window.__cspViolation(`${e.effectiveDirective} blocked ${e.blockedURI || "inline"} `
                        + `in ${e.sourceFile || e.documentURI}:${e.lineNumber}`);
});
"""


class PolicedBrowser:
    """Chromium whose pages record every Content-Security-Policy violation they report
    (the securitypolicyviolation event and Chromium's console message) and the policy
    header of every document they load."""

    def __init__(self, chromium):
        self.chromium = chromium
        self.violations: list[str] = []
        self.policies: list[str | None] = []

    def new_page(self, **options):
        context = self.chromium.new_context(**options)
        context.expose_binding("__cspViolation",
                               lambda source, text: self.violations.append(text))
        context.add_init_script(REPORT_VIOLATIONS)
        page = context.new_page()
        page.on("console", self._console)
        page.on("response", self._response)
        return page

    def _console(self, message):
        if "Content Security Policy" in message.text:
            self.violations.append(message.text)

    def _response(self, response):
        if response.request.resource_type == "document":
            self.policies.append(response.headers.get("content-security-policy"))


@pytest.fixture
def browser(monkeypatch, settings):
    # Playwright's sync API runs an event loop in this thread; the ORM calls the test makes
    # between browser steps are still plain synchronous ones.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    # The production policy (console.production enforces the same one).
    settings.CONTENT_SECURITY_POLICY = POLICY
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        policed = PolicedBrowser(chromium)
        yield policed
        # The test's ORM calls, made while Playwright's loop runs in this thread, opened a
        # connection of their own (Django keeps one per context): closed here, in that
        # context, it would otherwise outlive the tests and keep the test database from
        # being dropped ("being accessed by other users").
        connections.close_all()
        chromium.close()
    assert policed.policies and all("script-src 'self'" in (h or "")
                                    for h in policed.policies), policed.policies
    assert policed.violations == [], "\n".join(policed.violations)


def make_user(name, group):
    user = User.objects.create_user(name, password="pw-" + name)
    user.groups.add(Group.objects.get(name=group))
    return user


def sign_in(browser, live_server, name):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill(name)
    page.get_by_label("Password").fill("pw-" + name)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/runs/")
    return page


@pytest.fixture
def unsettled_run(roles, script):
    """A high-impact write whose outcome is unknown: only a person can settle it."""
    script.plan["post-ledger"] = [UnknownOutcome("timeout after the ledger got the request")]
    run = new_run()
    executor.advance_run(run.pk, worker="w1")
    assert Run.objects.get(pk=run.pk).status == RunStatus.ATTENTION
    return run


def test_an_operator_finds_a_run_in_attention_and_reconciles_it(browser, live_server,
                                                                unsettled_run):
    make_user("olga", "operators")
    page = sign_in(browser, live_server, "olga")
    page.screenshot(path=str(SCREENSHOTS / "runs-list.png"), full_page=True)
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280

    page.get_by_role("navigation", name="Main").get_by_role("link", name="Attention").click()
    page.get_by_role("link", name=f"#{unsettled_run.pk}").click()
    expect(page.get_by_text("unknown outcome not settled", exact=True)).to_be_visible()
    # The page leads with one recommended action: look the ledger entry up by its key.
    expect(page.locator("#next-step")).to_contain_text("Look post-ledger up by its key")
    expect(page.locator("button.primary")).to_have_count(1)
    page.screenshot(path=str(SCREENSHOTS / "run-detail.png"), full_page=True)
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280

    page.locator("#recommended-reconcile").click()
    dialog = page.locator("#dialog-reconcile")
    expect(dialog).to_be_visible()
    page.keyboard.press("Escape")  # the dialog is keyboard-usable: Escape closes it
    expect(dialog).to_be_hidden()
    page.locator("#recommended-reconcile").click()
    dialog.get_by_label("I found the effect: record it as done").check()
    dialog.get_by_label("Remote reference (when found)").fill("LE-4242")
    dialog.get_by_label("Evidence (required when recording by hand)").fill(
        "entry LE-4242 in the ledger UI, same transaction reference")
    dialog.get_by_label("Reason").fill("ledger timed out after committing")
    dialog.get_by_role("button", name="Reconcile", exact=True).click()

    expect(page.get_by_text("Reconcile: done.")).to_be_visible()
    expect(page.locator("#run-live h1 .badge")).to_have_text("queued")
    assert step(unsettled_run, "post-ledger").remote_ref == "LE-4242"
    record = AuditRecord.objects.get(run=unsettled_run, action="reconciled", actor_label="olga")
    page.reload()
    row = page.locator("tr", has=page.get_by_role("cell", name="reconciled"))
    expect(row.filter(has_text="olga")).to_have_count(1)
    assert record.reason == "ledger timed out after committing"


def test_an_auditor_sees_no_action_and_a_forged_post_is_refused(browser, live_server,
                                                                unsettled_run):
    make_user("aude", "auditors")
    page = sign_in(browser, live_server, "aude")
    page.goto(f"{live_server.url}/runs/{unsettled_run.pk}/")
    expect(page.get_by_text("unknown outcome not settled", exact=True)).to_be_visible()
    expect(page.get_by_role("button", name="Reconcile…")).to_have_count(0)
    expect(page.get_by_role("button", name="Terminate…")).to_have_count(0)
    token = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    response = page.request.post(
        f"{live_server.url}/runs/{unsettled_run.pk}/terminate/",
        form={"reason": "forged", "seen": str(unsettled_run.audit_seq)},
        headers={"X-CSRFToken": token, "Referer": f"{live_server.url}/runs/"})
    assert response.status == 403
    assert Run.objects.get(pk=unsettled_run.pk).status == RunStatus.ATTENTION
    assert not AuditRecord.objects.filter(run=unsettled_run, action="terminated").exists()


def test_an_approver_approves_from_the_link_in_the_email(browser, live_server, roles, script,
                                                         settings, mailoutbox):
    import re

    from approvals.notifications import publish_notifications
    from approvals.requests import open_pending_requests

    settings.APPROVALS_BASE_URL = live_server.url
    make_user("ann", "approvers").__class__.objects.filter(username="ann").update(
        email="ann@example.com")
    run = new_run("test-approval")
    executor.advance_run(run.pk, worker="w1")
    assert open_pending_requests() == 1
    publish_notifications()
    link = re.search(r"https?://\S+/link/\S+", mailoutbox[0].body).group(0)

    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(link)  # not signed in yet: the login page, then back to the request
    page.get_by_label("Username").fill("ann")
    page.get_by_label("Password").fill("pw-ann")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("button", name="Approve")).to_be_visible()
    assert step(run, "approve").status == "waiting"  # opening the link changed nothing
    page.get_by_label("Comment").fill("amount matches the order")
    page.get_by_role("button", name="Approve").click()
    expect(page.get_by_text("Your decision (approved) is recorded.")).to_be_visible()
    page.screenshot(path=str(SCREENSHOTS / "approval.png"), full_page=True)
    assert step(run, "approve").status == "succeeded"
    assert AuditRecord.objects.get(run=run, action="approval_decided").actor_label == "ann"
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED


def test_every_page_works_under_the_production_policy(browser, live_server, unsettled_run):
    User.objects.create_superuser("root", password="pw-root")
    page = sign_in(browser, live_server, "root")
    for path in ("/runs/", "/attention/", "/audit/", "/workflows/test-orders/",
                 "/approvals/", "/admin/", "/admin/api/apitoken/add/",
                 "/admin/axes/accessattempt/", "/api/docs", "/no-such-page/"):
        page.goto(f"{live_server.url}{path}")
        page.wait_for_load_state("networkidle")
    # The run page's dialogs open and close through static/js/console.js.
    page.goto(f"{live_server.url}/runs/{unsettled_run.pk}/")
    page.get_by_role("button", name="Terminate…").click()
    dialog = page.locator("#dialog-terminate")
    expect(dialog).to_be_visible()
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_be_hidden()
    # Swagger UI draws the API's operations from /api/openapi.json.
    page.goto(f"{live_server.url}/api/docs")
    expect(page.get_by_text("/api/runs").first).to_be_visible()
