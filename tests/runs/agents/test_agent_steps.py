"""Agent steps against the sandbox's model over real HTTP, advanced in this process: every
turn stored before its tools run, each tool call keyed and checkpointed, budgets and bad
arguments stopping where they must. Each test counts what the sandbox holds afterwards."""

import json

import pytest

from audit.chain import Actor
from audit.models import AuditRecord
from demo.sandbox.models import LedgerEntry, ModelCall, Task
from runs.machine import keys, transitions
from runs.machine.errors import TransitionNotAllowed
from runs.machine.transitions.attempts import result_digest
from runs.models import AgentTurn, AttentionReason, RunStatus, Step, ToolCall
from tests.agent_runs import ACTOR, LARGE, advance, start_triage

pytestmark = pytest.mark.django_db(transaction=True)



@pytest.fixture(autouse=True)
def sandbox(live_sandbox):
    return live_sandbox


def calls(run):
    return list(ToolCall.objects.filter(step__run=run).order_by("turn", "index"))


def test_the_agent_runs_its_tools_once_each_and_completes(sandbox):
    run = advance(start_triage())
    assert run.status == RunStatus.COMPLETED, run.status_message
    made = calls(run)
    assert [c.tool for c in made] == ["read-invoice", "lookup-vendor", "open-approval-task",
                                      "post-ledger"]
    assert all(c.status == "succeeded" and c.attempt == 1 for c in made)
    assert Task.objects.count() == 1 and LedgerEntry.objects.count() == 1
    entry = LedgerEntry.objects.get()
    post = made[3]
    assert entry.transaction_ref == post.idempotency_key == keys.tool_call_key(
        "invoice-triage", run.business_key, "triage", 1, 3, 0, "post-ledger")
    assert post.remote_ref == entry.ref and str(entry.amount) == "345.48"
    # Four turns with tool calls and a final answer: five model requests, no more.
    assert AgentTurn.objects.filter(step__run=run).count() == 5
    assert ModelCall.objects.count() == 5
    triage = Step.objects.get(run=run, name="triage")
    assert "LE-" in triage.result["answer"] and triage.result["tool_calls"] == 4
    # Each call's one record carries its intent (key, start, arguments' hash) and outcome.
    for c in made:
        (record,) = AuditRecord.objects.filter(run=run, data__tool_call=c.ref)
        assert record.action == "tool_call_succeeded"
        assert (record.data["key"], record.data["args_hash"]) == (c.idempotency_key,
                                                                  c.args_hash)
        assert record.data["started_at"] == c.attempt_started_at.isoformat()
        assert record.data["result_sha256"] == result_digest(c.result)
    # The declared redaction holds in the audit trail: the arguments are not in it.
    chain = json.dumps(list(AuditRecord.objects.filter(run=run).values_list("data")))
    assert post.arguments["iban"] not in chain


def test_a_large_posting_waits_for_an_approval_bound_to_its_arguments(sandbox):
    run = advance(start_triage(LARGE))
    assert run.status == RunStatus.WAITING and run.next_wake_at is None
    (waiting,) = transitions.waiting_tool_calls(run)
    assert waiting.tool == "post-ledger" and LedgerEntry.objects.count() == 0
    assert Task.objects.count() == 1  # the low-impact task did not wait
    with pytest.raises(TransitionNotAllowed, match="never authorises"):
        transitions.decide_tool_call(run.pk, step_name="triage", call_ref=waiting.ref,
                                     args_hash="0" * 64, approved=True, actor=ACTOR)
    assert LedgerEntry.objects.count() == 0
    transitions.decide_tool_call(run.pk, step_name="triage", call_ref=waiting.ref,
                                 args_hash=waiting.args_hash, approved=True, actor=ACTOR)
    run = advance(run)
    assert run.status == RunStatus.COMPLETED, run.status_message
    assert LedgerEntry.objects.count() == 1
    # A second decision on the same request changes nothing: it no longer waits.
    with pytest.raises(TransitionNotAllowed):
        transitions.decide_tool_call(run.pk, step_name="triage", call_ref=waiting.ref,
                                     args_hash=waiting.args_hash, approved=True, actor=ACTOR)


def test_changed_arguments_after_a_decline_need_their_own_approval(sandbox):
    run = advance(start_triage(LARGE, notes="[sandbox-script: invoice-triage change-args]"))
    (first,) = transitions.waiting_tool_calls(run)
    transitions.decide_tool_call(run.pk, step_name="triage", call_ref=first.ref,
                                 args_hash=first.args_hash, approved=False, actor=ACTOR,
                                 comment="too much for one posting")
    run = advance(run)
    # The model proposes another amount: a new call, waiting for its own approval.
    (second,) = transitions.waiting_tool_calls(run)
    assert second.pk != first.pk and second.args_hash != first.args_hash
    assert second.arguments["amount"] != first.arguments["amount"]
    # The approval of the first arguments authorises nothing now.
    for ref in (first.ref, second.ref):
        with pytest.raises(TransitionNotAllowed):
            transitions.decide_tool_call(run.pk, step_name="triage", call_ref=ref,
                                         args_hash=first.args_hash, approved=True,
                                         actor=ACTOR)
    transitions.decide_tool_call(run.pk, step_name="triage", call_ref=second.ref,
                                 args_hash=second.args_hash, approved=True, actor=ACTOR)
    run = advance(run)
    assert run.status == RunStatus.COMPLETED, run.status_message
    entry = LedgerEntry.objects.get()
    assert f"{entry.amount:.2f}" == second.arguments["amount"]
    assert ToolCall.objects.get(pk=first.pk).status == "declined"


def test_invalid_arguments_are_kept_returned_to_the_model_and_never_executed(sandbox):
    run = advance(start_triage(notes="[sandbox-script: invoice-triage invalid-args-once]"))
    assert run.status == RunStatus.COMPLETED, run.status_message
    invalid = ToolCall.objects.get(step__run=run, status="invalid")
    assert invalid.tool == "post-ledger" and invalid.arguments["amount"] == "a lot"
    assert invalid.attempt == 0 and "amount" in invalid.error_message
    assert LedgerEntry.objects.count() == 1
    assert AuditRecord.objects.filter(run=run, action="tool_call_invalid").count() == 1


def test_arguments_invalid_past_the_schema_error_budget_stop_the_run(sandbox):
    run = advance(start_triage(notes="[sandbox-script: invoice-triage invalid-args-always]"))
    assert run.status == RunStatus.ATTENTION
    assert run.attention_reason == AttentionReason.MODEL_OUTPUT_PAUSED
    assert "3 tool calls had arguments that fail their schema (budget 2)" in \
        run.status_message
    assert LedgerEntry.objects.count() == 0


def test_an_invented_tool_stops_the_run_naming_it(sandbox):
    run = advance(start_triage(notes="[sandbox-script: invoice-triage invent-tool]"))
    assert run.status == RunStatus.ATTENTION
    assert run.attention_reason == AttentionReason.MODEL_OUTPUT_PAUSED
    assert "'wire-money'" in run.status_message
    invented = ToolCall.objects.get(step__run=run, tool="wire-money")
    assert invented.status == "invalid" and invented.attempt == 0
    assert Task.objects.count() == 0 and LedgerEntry.objects.count() == 0


def test_a_model_that_never_finishes_spends_its_budget_and_stops(sandbox):
    run = advance(start_triage(notes="[sandbox-script: invoice-triage loop]"), times=3)
    assert run.status == RunStatus.ATTENTION
    assert run.attention_reason == AttentionReason.BUDGET_EXHAUSTED
    assert "budget spent" in run.status_message
    assert ModelCall.objects.count() <= 8  # max_turns
    assert Task.objects.count() == 0


def test_a_rate_limited_call_is_sent_again_with_the_same_key(sandbox):
    from demo.sandbox import faults

    faults.add("ledger.post", faults.RATE_LIMIT, times=1)
    run = advance(start_triage())
    assert run.status == RunStatus.COMPLETED, run.status_message
    post = ToolCall.objects.get(step__run=run, tool="post-ledger")
    assert post.attempt == 2 and LedgerEntry.objects.count() == 1
    attempts = AuditRecord.objects.filter(run=run, data__tool_call=post.ref,
                                          data__has_key="started_at")
    assert [r.data["key"] for r in attempts] == [post.idempotency_key] * 2
    assert AuditRecord.objects.filter(run=run, action="retry_scheduled",
                                      data__tool_call=post.ref).count() == 1


def test_an_unknown_outcome_is_reconciled_by_key_not_sent_again(sandbox):
    from demo.sandbox import faults

    faults.add("ledger.post", faults.COMMIT_THEN_TIMEOUT, times=1)
    run = advance(start_triage())
    assert run.status == RunStatus.COMPLETED, run.status_message
    post = ToolCall.objects.get(step__run=run, tool="post-ledger")
    assert post.attempt == 1 and post.remote_ref == LedgerEntry.objects.get().ref
    reconciled = AuditRecord.objects.get(run=run, action="reconciled",
                                         data__tool_call=post.ref)
    assert reconciled.data["verdict"] == "found"


def test_a_late_failure_undoes_the_agents_effects_newest_first(sandbox):
    from runs.machine import crashpoints

    run = start_triage()
    with crashpoints.failing("tell-requester"):
        run = advance(run)
    assert run.status == RunStatus.ATTENTION
    assert run.attention_reason == AttentionReason.PERMANENT_ERROR
    entry, task = LedgerEntry.objects.get(), Task.objects.get()
    # The agent posted to the ledger (high impact): undoing it takes a second person, and
    # the compensation pauses before the agent's undo until a person confirms it.
    with pytest.raises(TransitionNotAllowed, match="second person"):
        transitions.compensate(run.pk, actor=ACTOR, reason="requester unreachable")
    transitions.compensate(run.pk, actor=ACTOR, reason="requester unreachable",
                           approved_by=Actor.system("second"))
    run = advance(run)
    assert run.status == RunStatus.ATTENTION
    assert run.attention_reason == AttentionReason.COMPENSATION_PAUSED
    assert LedgerEntry.objects.count() == 1
    transitions.confirm_compensation(run.pk, step_name="triage", actor=ACTOR,
                                     reason="reversal checked")
    run = advance(run)
    assert run.status == RunStatus.COMPENSATED, run.status_message
    undone = list(AuditRecord.objects.filter(run=run, action="tool_call_compensated")
                  .order_by("seq").values_list("data__tool", flat=True))
    assert undone == ["post-ledger", "open-approval-task"]
    # One record per undo: its intent is the call's row, its outcome record carries it.
    assert not AuditRecord.objects.filter(run=run,
                                          action="tool_call_compensation_intent").exists()
    reversal = LedgerEntry.objects.get(reverses=entry)
    assert reversal.amount == -entry.amount
    task.refresh_from_db()
    assert task.status == Task.CANCELLED and task.cancelled_at > reversal.created_at
    post = ToolCall.objects.get(step__run=run, tool="post-ledger")
    assert post.status == "compensated" and post.compensation_ref == reversal.ref
    assert reversal.transaction_ref == post.compensation_key != post.idempotency_key
    record = AuditRecord.objects.get(run=run, action="tool_call_compensated",
                                     data__tool="post-ledger")
    assert record.data["key"] == post.compensation_key
    assert record.data["remote_ref"] == reversal.ref and record.data["started_at"]
    assert Step.objects.get(run=run, name="triage").status == "compensated"


def test_an_operator_settles_one_unknown_tool_call_by_its_key(sandbox):
    from demo.sandbox import faults
    from runs.operator.reconciliation import reconcile_tool_call_by_key

    faults.add("ledger.post", faults.COMMIT_THEN_TIMEOUT, times=1)
    faults.add("ledger.lookup", faults.UNAVAILABLE, times=3)
    run = advance(start_triage())
    assert run.status == RunStatus.ATTENTION, run.status_message
    assert run.attention_reason == AttentionReason.UNKNOWN_OUTCOME
    assert "3 lookups by key failed" in run.status_message
    post = ToolCall.objects.get(step__run=run, tool="post-ledger")
    assert post.status == "unknown" and LedgerEntry.objects.count() == 1
    step = Step.objects.get(run=run, name="triage")
    assert step.status == "unknown"
    # Nothing is undone, nor sent again, while it is unknown.
    with pytest.raises(TransitionNotAllowed, match="settle triage first"):
        transitions.compensate(run.pk, actor=ACTOR, reason="undo",
                               approved_by=Actor.system("second"))
    with pytest.raises(TransitionNotAllowed, match="reason"):
        reconcile_tool_call_by_key(run.pk, step_name="triage", call_ref=post.ref,
                                   actor=ACTOR, reason=" ")
    reconcile_tool_call_by_key(run.pk, step_name="triage", call_ref=post.ref, actor=ACTOR,
                               reason="the ledger answers again")
    post.refresh_from_db()
    assert post.status == "succeeded" and post.remote_ref == LedgerEntry.objects.get().ref
    run = advance(run)
    assert run.status == RunStatus.COMPLETED, run.status_message
    assert LedgerEntry.objects.count() == 1 and post.attempt == 1
    record = AuditRecord.objects.filter(run=run, action="reconciled",
                                        data__tool_call=post.ref).last()
    assert record.actor_label == "test" and record.reason == "the ledger answers again"


def test_the_run_page_shows_the_conversation_with_declared_fields_redacted(sandbox, client):
    from django.contrib.auth.models import User

    run = advance(start_triage())
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    page = client.get(f"/runs/{run.pk}/").content.decode()
    post = ToolCall.objects.get(step__run=run, tool="post-ledger")
    assert "Agent triage: 5 turns, 4 tool calls" in page
    assert post.idempotency_key in page and post.remote_ref in page
    assert "[redacted]" in page and post.arguments["iban"] not in page
