"""manage.py run_action aimed at one tool call (--call STEP:TURN.INDEX): each tool-call
action the run offers can be performed from the command line, through the same table,
permission rule and transitions as the run page. The invoice-triage agent runs against the
sandbox over real HTTP; each test counts what the receiver holds afterwards."""

import io

import pytest
from django.core.management import CommandError, call_command

from audit.models import AuditRecord
from demo.sandbox import faults
from demo.sandbox.models import LedgerEntry, Task
from runs.models import AttentionReason, RunStatus, ToolCall
from tests.agent_runs import advance, start_triage

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def sandbox(live_sandbox):
    return live_sandbox


def run_action(*args) -> str:
    out = io.StringIO()
    call_command("run_action", *map(str, args), stdout=out)
    return out.getvalue()


def offered(run) -> dict[str, str]:
    out = run_action(run.pk, "--user", "olga")
    return dict(line.split(None, 1) for line in out.strip().splitlines())


def ledger_call(run) -> ToolCall:
    return ToolCall.objects.get(step__run=run, tool="post-ledger")


def unknown_posting(key: str):
    faults.add("ledger.post", faults.COMMIT_THEN_TIMEOUT, times=1)
    faults.add("ledger.lookup", faults.UNAVAILABLE, times=3)
    run = advance(start_triage(key=f"tenant-42:{key}"))
    assert run.attention_reason == AttentionReason.UNKNOWN_OUTCOME, run.status_message
    return run


def refused_posting(key: str):
    faults.add("ledger.post", faults.FORBIDDEN, times=1)
    run = advance(start_triage(key=f"tenant-42:{key}"))
    assert run.attention_reason == AttentionReason.PERMANENT_ERROR, run.status_message
    assert ledger_call(run).status == "failed" and LedgerEntry.objects.count() == 0
    return run


def test_reconcile_one_tool_call_from_the_cli(operator):
    run = unknown_posting("cli-reconcile")
    call = ledger_call(run)
    assert offered(run)["reconcile_tool_call"] == "offered"
    out = run_action(run.pk, "reconcile_tool_call", "--user", "olga", "--reason",
                     "the ledger answers again", "--call", f"triage:{call.ref}")
    assert (f"Reconcile tool call: the remote system has tool call {call.ref} of triage under "
            "its key: it is recorded as done.") in out
    call.refresh_from_db()
    entry = LedgerEntry.objects.get()
    assert call.status == "succeeded" and call.remote_ref == entry.ref
    record = AuditRecord.objects.get(run=run, action="reconciled", data__tool_call=call.ref)
    assert record.actor_label == "olga" and record.data["verdict"] == "found"
    assert advance(run).status == RunStatus.COMPLETED
    assert LedgerEntry.objects.count() == 1


def test_reconcile_by_hand_from_the_cli_with_step_and_call_given_apart(operator):
    run = unknown_posting("cli-by-hand")
    call = ledger_call(run)
    with pytest.raises(CommandError, match="evidence"):
        run_action(run.pk, "reconcile_tool_call", "--user", "olga", "--reason", "checked",
                   "--step", "triage", "--call", call.ref, "--mode", "not_found")
    assert ledger_call(run).status == "unknown"
    out = run_action(run.pk, "reconcile_tool_call", "--user", "olga", "--reason", "checked",
                     "--step", "triage", "--call", call.ref, "--mode", "found",
                     "--remote-ref", "LE-1", "--evidence", "seen in the ledger's screen")
    assert "Reconcile tool call: done" in out
    call.refresh_from_db()
    assert (call.status, call.remote_ref) == ("succeeded", "LE-1")


def test_retry_one_tool_call_from_the_cli(operator):
    run = refused_posting("cli-retry")
    call = ledger_call(run)
    assert offered(run)["retry_tool_call"] == "offered"
    out = run_action(run.pk, "retry_tool_call", "--user", "olga", "--reason",
                     "the ledger granted the account", "--call", f"triage:{call.ref}")
    assert "Retry tool call: done" in out
    run = advance(run)
    assert run.status == RunStatus.COMPLETED, run.status_message
    call.refresh_from_db()
    entry = LedgerEntry.objects.get()
    assert call.status == "succeeded" and call.attempt == 2
    assert entry.transaction_ref == call.idempotency_key


def test_undo_one_tool_call_from_the_cli(operator):
    run = refused_posting("cli-undo")
    task_call = ToolCall.objects.get(step__run=run, tool="open-approval-task")
    assert offered(run)["compensate_tool_call"] == "offered"
    out = run_action(run.pk, "compensate_tool_call", "--user", "olga", "--reason",
                     "invoice withdrawn", "--call", f"triage:{task_call.ref}")
    assert "Undo tool call: done" in out
    task_call.refresh_from_db()
    assert task_call.status == "compensated"
    assert Task.objects.get().status == Task.CANCELLED and Task.objects.count() == 1
    assert LedgerEntry.objects.count() == 0


def test_the_cli_says_which_call_it_needs_and_changes_nothing_when_wrong(operator):
    run = refused_posting("cli-wrong")
    call = ledger_call(run)
    before = (list(ToolCall.objects.filter(step__run=run).values_list("status", "attempt")),
              AuditRecord.objects.filter(run=run).count())
    cases = [
        ([], r"allows calls of triage\); nothing was done\. Give it with --call STEP:TURN\.INDEX"),
        (["--call", "triage:first"], "the call is TURN.INDEX"),
        (["--call", call.ref], "name the agent step too"),
        (["--call", f"other:{call.ref}", "--step", "triage"], "names step 'other'"),
        (["--call", "triage:9.9"], "was not done"),
    ]
    for extra, message in cases:
        with pytest.raises(CommandError, match=message):
            run_action(run.pk, "retry_tool_call", "--user", "olga", "--reason", "again",
                       *extra)
    with pytest.raises(CommandError, match="--call does not apply with resume"):
        run_action(run.pk, "resume", "--user", "olga", "--reason", "again",
                   "--call", f"triage:{call.ref}")
    after = (list(ToolCall.objects.filter(step__run=run).values_list("status", "attempt")),
             AuditRecord.objects.filter(run=run).count())
    assert after == before and LedgerEntry.objects.count() == 0


def test_an_auditor_may_not_act_on_a_tool_call_from_the_cli(operator, auditor):
    run = refused_posting("cli-auditor")
    call = ledger_call(run)
    with pytest.raises(CommandError, match="aude may not retry tool call"):
        run_action(run.pk, "retry_tool_call", "--user", "aude", "--reason", "forged",
                   "--call", f"triage:{call.ref}")
    assert ledger_call(run).status == "failed" and LedgerEntry.objects.count() == 0
