"""Retrying a tool call that did not fail is refused naming the call and its state, and the
calls of its step that can be retried now, if any: "tool call 0.0 (read-invoice) of triage
did not fail: it succeeded (succeeded); no call of triage can be retried now". On an agent
step whose outcome is unknown it answered with the step's state instead ("step triage of run
N is unknown: it did not stop on a failed tool call"), as if the call named had failed. The
call's state is told first (tool_call_rules.call_state_refusal, asked by
operator_rules.named_target), the same at the console, the API and the command line; nothing
is written and nothing is sent."""


import pytest
from django.test import Client

from api.tokens import token_create
from demo.sandbox import faults
from demo.sandbox.models import LedgerEntry
from runs.models import AttentionReason, RunStatus, StepStatus, ToolCall
from tests.agent_runs import SMALL, advance, posting_left_unknown, start_triage
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


def calls(run) -> list[tuple]:
    return [(c.ref, c.tool, c.status, c.attempt, c.next_attempt_at) for c in
            ToolCall.objects.filter(step__run=run).order_by("turn", "index")]


def retried(doors, run, call: ToolCall):
    given = {"reason": "INC-7", "step": "triage", "call": call.ref}
    answers = {door: ask(doors, door, run, "retry_tool_call", given) for door in DOORS}
    assert answers["console"] == answers["api"] == answers["cli"], answers
    return answers["api"]


def test_on_an_unknown_agent_step_the_call_is_named_not_the_steps_state(live_sandbox, doors):
    run = posting_left_unknown(SMALL)
    assert run.steps.get(name="triage").status == StepStatus.UNKNOWN
    read = ToolCall.objects.get(step__run=run, tool="read-invoice")
    before = calls(run)
    said = retried(doors, run, read)
    assert said.words == as_told(run, (
        f"tool call {read.ref} (read-invoice) of triage did not fail: it succeeded "
        "(succeeded); no call of triage can be retried now")), said
    assert said.outcome == "refused" and said.records == [] and said.requests == []
    assert said.status == RunStatus.ATTENTION
    assert run.steps.get(name="triage").status == StepStatus.UNKNOWN
    assert calls(run) == before


def test_the_calls_that_can_be_retried_are_named(live_sandbox, doors):
    faults.add("ledger.post", faults.FORBIDDEN, times=1)
    run = advance(start_triage(key="tenant-42:retry-the-other"))
    assert run.attention_reason == AttentionReason.PERMANENT_ERROR, run.status_message
    posting = ToolCall.objects.get(step__run=run, tool="post-ledger")
    read = ToolCall.objects.get(step__run=run, tool="read-invoice")
    assert posting.status == "failed"
    before = calls(run)
    said = retried(doors, run, read)
    assert said.words == as_told(run, (
        f"tool call {read.ref} (read-invoice) of triage did not fail: it succeeded "
        f"(succeeded); tool call {posting.ref} (post-ledger) of triage can be retried "
        "now")), said
    assert said.outcome == "refused" and said.records == [] and said.requests == []
    assert said.status == RunStatus.ATTENTION
    assert calls(run) == before and LedgerEntry.objects.count() == 0
