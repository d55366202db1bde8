"""In a real browser, under the production Content-Security-Policy: an operator reconciles
one tool call of an agent step. The invoice-triage agent's ledger posting committed at the
ledger and then timed out, and three lookups by key failed: the call's outcome is unknown
and the run waits for a person. The operator opens the run, finds the call with its key,
reconciles that call with a reason, and the call becomes succeeded with the ledger entry the
lookup by key found; the ledger holds exactly one entry."""


import pytest
from playwright.sync_api import expect

from audit.chain import Actor
from audit.models import AuditRecord
from demo.sandbox import faults
from demo.sandbox.models import LedgerEntry
from runs.execution import executor
from runs.machine import transitions
from runs.models import AttentionReason, RunStatus, ToolCall
from tests.console.test_browser import SCREENSHOTS, browser, make_user, sign_in  # noqa: F401
from tests.factories import make_due

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def unknown_tool_call(live_sandbox, roles):
    faults.add("ledger.post", faults.COMMIT_THEN_TIMEOUT, times=1)
    faults.add("ledger.lookup", faults.UNAVAILABLE, times=3)
    run, _ = transitions.start_run(
        workflow="invoice-triage", business_key="tenant-42:INV-2001",
        input={"tenant": "tenant-42", "invoice_number": "INV-2001",
               "requester_email": "requester@example.com"},
        actor=Actor.system("test"), wake=False)
    for _ in range(10):
        executor.advance_run(run.pk, worker="w1")
        run.refresh_from_db()
        if run.status == RunStatus.WAITING and run.next_wake_at is not None:
            make_due(run)
        elif run.status != RunStatus.QUEUED:
            break
    assert run.attention_reason == AttentionReason.UNKNOWN_OUTCOME, run.status_message
    call = ToolCall.objects.get(step__run=run, tool="post-ledger")
    assert call.status == "unknown" and LedgerEntry.objects.count() == 1
    return run, call


def test_an_operator_reconciles_one_tool_call_by_its_key(browser, live_server,  # noqa: F811
                                                         unknown_tool_call):
    run, call = unknown_tool_call
    make_user("olga", "operators")
    page = sign_in(browser, live_server, "olga")
    page.goto(f"{live_server.url}/runs/{run.pk}/")

    # The conversation shows the call with its key, and offers reconcile on that call only.
    row = page.locator("table.agent-conversation tr", has_text=call.idempotency_key)
    expect(row).to_have_count(1)
    expect(row).to_contain_text("post-ledger")
    expect(row).to_contain_text("unknown")
    expect(row).to_contain_text("[redacted]")  # the tool declares its iban redacted
    button = row.get_by_role("button", name="Reconcile tool call…")
    expect(button).to_have_count(1)
    expect(page.get_by_role("button", name="Reconcile tool call…")).to_have_count(1)
    page.screenshot(path=str(SCREENSHOTS / "run-agent-tool-call.png"), full_page=True)
    # The conversation fits the page (1,280 pixels wide): its JSON's long strings wrap
    # instead of pushing the status, its buttons and the error off the screen.
    fits = page.evaluate("""() => {
        const table = document.querySelector('table.agent-conversation');
        const main = document.querySelector('main');
        return [document.documentElement.scrollWidth <= document.documentElement.clientWidth,
                table.getBoundingClientRect().right <= main.getBoundingClientRect().right];
    }""")
    assert fits == [True, True]

    button.click()
    dialog = page.locator(f"#dialog-reconcile_tool_call-triage-{call.turn}-{call.index}")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text(call.idempotency_key)
    expect(dialog.get_by_label("Ask the remote system by the call's key")).to_be_checked()
    dialog.get_by_label("Reason").fill("the ledger answers again")
    dialog.get_by_role("button", name="Reconcile tool call", exact=True).click()

    expect(page.get_by_text(f"Reconcile tool call: the remote system has tool call {call.ref} "
                            "of triage under its key: it is recorded as done.")).to_be_visible()
    entry = LedgerEntry.objects.get()
    row = page.locator("table.agent-conversation tr", has_text=call.idempotency_key)
    expect(row).to_contain_text("succeeded")
    expect(row).to_contain_text(entry.ref)
    expect(row.get_by_role("button")).to_have_count(0)
    call.refresh_from_db()
    assert call.status == "succeeded" and call.remote_ref == entry.ref
    assert call.attempt == 1 and LedgerEntry.objects.count() == 1
    assert entry.transaction_ref == call.idempotency_key
    record = AuditRecord.objects.get(run=run, action="reconciled", actor_label="olga")
    assert record.reason == "the ledger answers again"
    assert record.data["tool_call"] == call.ref and record.data["verdict"] == "found"
    # The run goes on: the agent finishes without posting again.
    expect(page.locator("#run-live h1 .badge")).to_have_text("queued")
