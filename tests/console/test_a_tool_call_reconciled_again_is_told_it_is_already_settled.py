"""Reconciling a tool call that is already settled is refused, and the refusal names the call
and its state: "tool call 3.0 (post-ledger) of triage is already settled: it succeeded
(succeeded), so it has nothing to reconcile". It named the run's state instead ("it is queued
for a worker (queued); in that state only Cancel or Terminate can be taken": the first
reconcile let the run go on), which says nothing of the call the person named. The call's
state is told first (tool_call_rules.call_state_refusal, asked by
operator_rules.named_target), the same at the console, the API and the command line, looked
up by key or recorded by hand; nothing is written and nothing is asked of the ledger."""


import pytest
from django.test import Client

from api.tokens import token_create
from approvals.operator_actions import act
from audit.models import AuditRecord
from demo.sandbox import faults
from demo.sandbox.models import LedgerEntry
from runs.models import RunStatus, ToolCall
from runs.operator.actions import ActionInput
from tests.agent_runs import SMALL, posting_left_unknown
from tests.console.test_the_console_the_api_and_the_cli_answer_each_action_alike_in_each_state import (  # noqa: E501
    Doors,
    ask,
    with_run_id_said,
)

pytestmark = pytest.mark.django_db(transaction=True)

DOORS = ("console", "api", "cli")


@pytest.fixture
def doors(operator):
    console = Client()
    console.force_login(operator)
    _, plaintext = token_create(name="ops", workflows=["invoice-triage"],
                                acting_user=operator)
    return Doors(operator, console, Client(HTTP_AUTHORIZATION=f"Bearer {plaintext}"))


def as_told(run, words: str) -> str:
    """`words` as ask() reports them (the run's id said RUN)."""
    return with_run_id_said(run.pk, words)


@pytest.mark.parametrize("given", [
    {"mode": "ask"},
    {"mode": "found", "remote_ref": "LE-FORGED", "evidence": "a receipt"},
    {"mode": "not_found", "evidence": "no posting in the ledger"},
], ids=["by key", "found by hand", "not found by hand"])
def test_a_settled_call_reconciled_again_is_said_to_be_settled_already(live_sandbox, doors,
                                                                       operator, given):
    run = posting_left_unknown(SMALL)
    call = ToolCall.objects.get(step__run=run, tool="post-ledger")
    assert call.status == "unknown"
    act("reconcile_tool_call", run.pk, user=operator, given=ActionInput(
        reason="the ledger answers again", step="triage", call=call.ref, mode="ask"))
    run.refresh_from_db()
    call.refresh_from_db()
    # Found under its key: settled, and the agent goes on.
    assert (run.status, call.status) == (RunStatus.QUEUED, "succeeded")
    settled = (call.status, call.remote_ref, call.finished_at)
    # A lookup asked now would take this fault: none may be asked.
    faults.add("ledger.lookup", faults.UNAVAILABLE, times=3)

    again = {"reason": "again", "step": "triage", "call": call.ref, **given}
    answers = {door: ask(doors, door, run, "reconcile_tool_call", again) for door in DOORS}
    assert answers["console"] == answers["api"] == answers["cli"], answers
    said = answers["api"]
    assert said.words == as_told(run, (
        f"tool call {call.ref} (post-ledger) of triage is already settled: it succeeded "
        "(succeeded), so it has nothing to reconcile; no call of triage can be reconciled "
        "now")), said
    assert said.outcome == "refused" and said.records == [] and said.requests == []
    assert said.status == RunStatus.QUEUED
    # Nothing asked of the ledger, nothing recorded: reconciled once, by the first person.
    assert faults.pending_count() == 3
    assert LedgerEntry.objects.count() == 1
    call.refresh_from_db()
    assert (call.status, call.remote_ref, call.finished_at) == settled
    (record,) = AuditRecord.objects.filter(run=run, action="reconciled")
    assert record.reason == "the ledger answers again"
