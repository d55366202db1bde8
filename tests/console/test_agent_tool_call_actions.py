"""The operator actions on one tool call of an agent step, through the run page's POST (the
one action table, runs.operator.actions): reconcile by key, retry with the same key, undo one call.
The invoice-triage agent runs against the sandbox over real HTTP; each test counts what the
receiver holds afterwards."""

import pytest
from django.urls import reverse
from django.utils import timezone

from audit.models import AuditRecord
from demo.sandbox import faults
from demo.sandbox.models import LedgerEntry, Task
from runs.machine import transitions
from runs.machine.errors import ReasonRequired, TransitionNotAllowed
from runs.machine.transitions.tool_call_rules import TOOL_CALL_ACTIONS
from runs.models import AttentionReason, Run, RunStatus, Step, ToolCall
from runs.operator.actions import ACTIONS, ActionInput
from runs.operator.guidance import recommend
from tests.agent_runs import ACTOR, LARGE, advance, start_triage

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def sandbox(live_sandbox):
    return live_sandbox


def post(client, run, action, **data):
    run.refresh_from_db()
    return client.post(reverse("console:action", args=[run.pk, action]),
                       {"seen": str(run.audit_seq), "step": "triage", **data}, follow=True)


def ledger_call(run):
    return ToolCall.objects.get(step__run=run, tool="post-ledger")


def unknown_posting(key="unknown"):
    """The ledger committed, then timed out; three lookups by key failed: a person's."""
    faults.add("ledger.post", faults.COMMIT_THEN_TIMEOUT, times=1)
    faults.add("ledger.lookup", faults.UNAVAILABLE, times=3)
    run = advance(start_triage(key=f"tenant-42:{key}"))
    assert run.attention_reason == AttentionReason.UNKNOWN_OUTCOME, run.status_message
    return run


def refused_posting(key="refused"):
    """The ledger refused the posting (403): the call failed, the task stands."""
    faults.add("ledger.post", faults.FORBIDDEN, times=1)
    run = advance(start_triage(key=f"tenant-42:{key}"))
    assert run.attention_reason == AttentionReason.PERMANENT_ERROR, run.status_message
    assert ledger_call(run).status == "failed" and LedgerEntry.objects.count() == 0
    return run


def test_the_run_page_offers_reconcile_on_the_unknown_call_only(client_for, operator):
    run = unknown_posting()
    call = ledger_call(run)
    page = client_for(operator).get(reverse("console:run", args=[run.pk])).content.decode()
    assert f'id="call-reconcile_tool_call-triage-{call.turn}-{call.index}"' in page
    slug = f"triage-{call.turn}-{call.index}"
    # The call's own button, and the next-step card's, which opens the same dialog.
    assert page.count('data-opens-dialog="dialog-reconcile_tool_call-') == 2
    assert page.count(f'data-opens-dialog="dialog-reconcile_tool_call-{slug}"') == 2
    assert 'id="recommended-reconcile_tool_call"' in page
    assert f'name="call" value="{call.ref}"' in page and call.idempotency_key in page
    # Not in the run's general actions card, which has no way to choose the call.
    assert 'id="action-reconcile_tool_call"' not in page


def test_the_attention_list_offers_tool_call_actions_without_a_query_per_agent_run(
        client_for, operator):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = client_for(operator)

    def drawn():
        with CaptureQueriesContext(connection) as ctx:
            page = client.get(reverse("console:attention")).content.decode()
        return page, len(ctx)

    refused_posting("listed-1")
    page, one = drawn()
    assert "Retry tool call" in page and "Reconcile tool call" not in page
    unknown_posting("listed-2")
    unknown_posting("listed-3")
    page, three = drawn()
    assert page.count("Reconcile tool call") == 2 and "Retry tool call" in page
    assert three == one


def test_reconcile_one_tool_call_by_its_key_from_the_run_page(client_for, operator):
    run = unknown_posting()
    call = ledger_call(run)
    client = client_for(operator)
    page = post(client, run, "reconcile_tool_call", call=call.ref, mode="ask", reason=" ")
    assert "Reconcile tool call needs a reason" in page.content.decode()
    assert ledger_call(run).status == "unknown"
    page = post(client, run, "reconcile_tool_call", call=call.ref, mode="ask",
                reason="the ledger answers again")
    assert (f"Reconcile tool call: the remote system has tool call {call.ref} of triage under "
            "its key: it is recorded as done.") in page.content.decode()
    call.refresh_from_db()
    entry = LedgerEntry.objects.get()
    assert call.status == "succeeded" and call.remote_ref == entry.ref
    record = AuditRecord.objects.get(run=run, action="reconciled", data__tool_call=call.ref,
                                     actor_label="olga")
    assert record.reason == "the ledger answers again" and record.data["verdict"] == "found"
    assert advance(run).status == RunStatus.COMPLETED
    assert LedgerEntry.objects.count() == 1


def test_an_auditor_may_not_reconcile_a_tool_call(client_for, auditor):
    run = unknown_posting()
    response = post(client_for(auditor), run, "reconcile_tool_call", call=ledger_call(run).ref,
                    mode="ask", reason="forged")
    assert response.status_code == 403
    assert ledger_call(run).status == "unknown"


def test_retry_a_failed_tool_call_with_the_same_key(client_for, operator):
    run = refused_posting()
    call = ledger_call(run)
    page = post(client_for(operator), run, "retry_tool_call", call=call.ref,
                reason="the ledger granted the account").content.decode()
    assert "Retry tool call: done." in page
    run = advance(run)
    assert run.status == RunStatus.COMPLETED, run.status_message
    call.refresh_from_db()
    entry = LedgerEntry.objects.get()
    assert call.status == "succeeded" and call.attempt == 2
    assert entry.transaction_ref == call.idempotency_key
    assert AuditRecord.objects.get(run=run, action="step_retried",
                                   data__tool_call=call.ref).data["key"] == call.idempotency_key


def test_retry_is_refused_once_the_model_answered_after_the_failure(sandbox):
    run = refused_posting("answered")
    call = ledger_call(run)
    step = Step.objects.get(run=run, name="triage")
    from runs.models import AgentTurn

    AgentTurn.objects.create(step=step, index=call.turn + 1, content="moving on",
                             created_at=timezone.now())
    with pytest.raises(TransitionNotAllowed, match="already answered"):
        transitions.retry_tool_call(run.pk, step_name="triage", call_ref=call.ref,
                                    actor=ACTOR, reason="again")
    assert ledger_call(run).status == "failed"


def test_only_an_unknown_call_is_reconciled_whoever_asks(sandbox):
    # The transition itself refuses (tool_call_rules.call_state_refusal), not only the page that
    # offers the action: the step has an unknown call, but the one aimed at has settled,
    # and reconciling it as found would overwrite its real outcome.
    run = unknown_posting("not-this-call")
    settled = ToolCall.objects.filter(step__run=run, status="succeeded").first()
    assert settled is not None
    ref_before = settled.remote_ref
    records = AuditRecord.objects.filter(run=run).count()
    from runs.definitions.definition import Found

    with pytest.raises(TransitionNotAllowed, match="is already settled: it succeeded"):
        transitions.reconcile_tool_call(run.pk, step_name="triage", call_ref=settled.ref,
                                        verdict=Found(ref="FORGED-1"), actor=ACTOR,
                                        reason="it happened", evidence="a forged receipt")
    settled.refresh_from_db()
    assert (settled.status, settled.remote_ref) == ("succeeded", ref_before)
    assert ledger_call(run).status == "unknown"
    assert AuditRecord.objects.filter(run=run).count() == records
    assert Run.objects.get(pk=run.pk).status == RunStatus.ATTENTION


def test_undo_one_low_impact_call_and_never_a_high_impact_one(client_for, operator):
    run = refused_posting("undo")
    task_call = ToolCall.objects.get(step__run=run, tool="open-approval-task")
    client = client_for(operator)
    page = client.get(reverse("console:run", args=[run.pk])).content.decode()
    assert "dialog-compensate_tool_call-triage-" in page
    page = post(client, run, "compensate_tool_call", call=task_call.ref,
                reason="invoice withdrawn").content.decode()
    assert "Undo tool call: done." in page
    task_call.refresh_from_db()
    task = Task.objects.get()
    assert task_call.status == "compensated" and task.status == Task.CANCELLED
    assert task_call.compensation_ref
    run.refresh_from_db()
    assert run.status == RunStatus.ATTENTION
    intent = AuditRecord.objects.get(run=run, action="tool_call_compensation_intent")
    assert intent.reason == "invoice withdrawn" and intent.data["key"] == \
        task_call.compensation_key
    assert AuditRecord.objects.filter(run=run, action="tool_call_compensated").count() == 1
    # Once undone, never again.
    with pytest.raises(TransitionNotAllowed, match="no effect that stands to undo: it was undone"):
        transitions.begin_tool_call_undo(run.pk, step_name="triage", call_ref=task_call.ref,
                                         actor=ACTOR, reason="again")


def test_a_high_impact_call_is_not_undone_alone(sandbox):
    faults.add("messenger.send", faults.FORBIDDEN, times=1)
    run = advance(start_triage(key="tenant-42:high"))
    assert run.status == RunStatus.ATTENTION, run.status_message
    call = ledger_call(run)
    assert call.status == "succeeded"
    with pytest.raises(TransitionNotAllowed, match="second person"):
        transitions.begin_tool_call_undo(run.pk, step_name="triage", call_ref=call.ref,
                                         actor=ACTOR, reason="undo it")
    assert LedgerEntry.objects.count() == 1


def test_the_next_step_points_at_the_unknown_tool_call_by_its_key(client_for, operator,
                                                                  auditor):
    run = unknown_posting()
    call = ledger_call(run)
    advice = recommend(run, list(run.steps.order_by("position")))
    assert advice.action.name == "reconcile_tool_call" and advice.step == "triage"
    assert call.idempotency_key in advice.why and "nothing to reconcile" not in advice.why
    assert advice.unknown == [f"whether tool call {call.ref} (post-ledger) of triage took "
                              "effect in the remote system"]
    # Someone who may not reconcile sees the advice without the button.
    page = client_for(auditor).get(reverse("console:run", args=[run.pk])).content.decode()
    assert 'id="recommended-reconcile_tool_call"' not in page
    assert "You may not reconcile tool call this run" in page


@pytest.mark.parametrize("action", TOOL_CALL_ACTIONS)
def test_every_tool_call_action_refuses_an_empty_reason_and_writes_nothing(sandbox, action):
    if action == "cancel_tool_call":
        # A posting that waits for a person's approval of its arguments.
        run = advance(start_triage(LARGE, key="tenant-42:noreason-cancel"))
    else:
        run = unknown_posting("noreason") if action == "reconcile_tool_call" else \
            refused_posting("noreason")
    call = ledger_call(run) if action != "compensate_tool_call" else \
        ToolCall.objects.get(step__run=run, tool="open-approval-task")
    steps = list(run.steps.order_by("position"))
    assert ACTIONS[action].refusal(run, steps) is None, "the run must allow the action"
    before = (run.audit_seq, list(ToolCall.objects.filter(step__run=run)
                                  .values_list("status", "attempt")), LedgerEntry.objects.count())
    for reason in ("", "   ", "\n\t"):
        with pytest.raises(ReasonRequired, match="needs a reason"):
            ACTIONS[action].perform(run.pk, actor=ACTOR, given=ActionInput(
                reason=reason, step="triage", call=call.ref, mode="ask"))
    after = (Run.objects.get(pk=run.pk).audit_seq, list(
        ToolCall.objects.filter(step__run=run).values_list("status", "attempt")),
        LedgerEntry.objects.count())
    assert after == before
