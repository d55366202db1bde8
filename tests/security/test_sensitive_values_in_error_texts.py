"""A declared sensitive value quoted by the code that failed with it (a step's error, a
tool's, a lookup's) is masked in the error text the runtime keeps and logs: no table holds it
in clear, no log line, no audit record, whatever the workflow's code put in its message."""

import logging

import pytest
from pydantic import BaseModel

from audit.chain import Actor
from audit.redaction import REDACTED, redact_text, values_masked
from runs.agents import agent_loop
from runs.definitions import definition
from runs.definitions.definition import RetryPolicy, StepResult, Workflow
from runs.execution import executor
from runs.machine import sensitive, transitions
from runs.machine.errors import PermanentError, UnknownOutcome
from runs.machine.transitions.agent_calls import ModelTurn
from runs.models import RunStatus, Step, StepStatus, ToolCall, ToolCallStatus
from tests.security.test_sensitive_fields import tables_holding
from tests.workflows import OrderIn

pytestmark = pytest.mark.django_db(transaction=True)

IBAN = "DE89370400440532013000"
ONCE = RetryPolicy(maximum_attempts=1)


class PayArgs(BaseModel):
    iban: str
    amount: int


@pytest.fixture
def closed_account():
    """A read step that returns an account it declares sensitive, then a write step that
    fails for good quoting it; and an agent whose tool declares the account sensitive and
    fails quoting it (its model is scripted by the test)."""
    steps = Workflow("test-sensitive-step-error", version=1, input=OrderIn)

    @steps.read("fetch-account", sensitive=("iban",))
    def fetch_account(ctx):
        return {"holder": "ACME", "iban": IBAN}

    @steps.write("pay", retry=ONCE)
    def pay(ctx):
        raise PermanentError(f"account {ctx.results['fetch-account']['iban']} is closed")

    agentic = Workflow("test-sensitive-tool-error", version=1, input=OrderIn)
    payer = agentic.agent("payer", system_prompt="Pay.")

    @payer.tool("pay", kind="write", args=PayArgs, redact=("iban",), retry=ONCE)
    def pay_tool(ctx, args):
        raise UnknownOutcome(f"the bank hung up while paying from {args.iban}")

    @pay_tool.reconcile
    def find_payment(ctx, args):
        raise PermanentError(f"no payment search for account {args.iban}")

    yield pay_tool
    definition.registry.unregister(steps)
    definition.registry.unregister(agentic)


def start(workflow: str):
    run, _ = transitions.start_run(workflow=workflow, business_key="acct-1",
                                   input={"order": "o-1"}, actor=Actor.system("test"),
                                   wake=False)
    return run


def test_a_steps_error_quoting_a_sensitive_result_keeps_it_masked(closed_account, caplog):
    caplog.set_level(logging.DEBUG)
    run = start("test-sensitive-step-error")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION

    paid = Step.objects.get(run=run, name="pay")
    assert paid.status == StepStatus.FAILED
    assert paid.error_message == f"PermanentError: account {REDACTED} is closed"
    assert tables_holding(IBAN) == []
    assert caplog.records and IBAN not in caplog.text


def test_a_tools_and_its_lookups_errors_quoting_a_sensitive_argument_keep_it_masked(
        closed_account, caplog, monkeypatch):
    caplog.set_level(logging.DEBUG)
    turns = [ModelTurn(content="", tool_calls=[
        {"id": "c0", "name": "pay", "arguments": f'{{"iban": "{IBAN}", "amount": 5}}'}])]
    monkeypatch.setattr(agent_loop, "ask_model", lambda *a, **kw: turns.pop(0))
    run = start("test-sensitive-tool-error")
    executor.advance_run(run.pk, worker="w1")

    (call,) = ToolCall.objects.filter(step__run=run)
    # The send ended unknown, and its lookup failed: both texts were kept, masked.
    assert call.status == ToolCallStatus.UNKNOWN, call.status
    assert sensitive.is_sealed(call.arguments["iban"])
    assert REDACTED in call.error_message
    assert tables_holding(IBAN) == []
    assert caplog.records and IBAN not in caplog.text


def test_only_the_values_opened_for_the_work_at_hand_are_masked():
    sealed = sensitive.encrypt({"iban": IBAN, "pin": 1234, "flag": True})
    text = f"{IBAN} / 1234 / True"
    assert redact_text(text) == text  # nothing opened: nothing known to mask
    with values_masked():
        sensitive.opened(sealed)
        assert redact_text(text) == f"{REDACTED} / {REDACTED} / True"
    assert redact_text(text) == text


def test_a_declared_value_reaches_the_effect_itself_unmasked(closed_account, monkeypatch):
    sent = []
    monkeypatch.setattr(closed_account, "fn",
                        lambda ctx, args: sent.append(args.iban) or StepResult({"ok": 1}))
    turns = [ModelTurn(content="", tool_calls=[
        {"id": "c0", "name": "pay", "arguments": f'{{"iban": "{IBAN}", "amount": 5}}'}]),
        ModelTurn(content="paid", tool_calls=[])]
    monkeypatch.setattr(agent_loop, "ask_model", lambda *a, **kw: turns.pop(0))
    run = start("test-sensitive-tool-error")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    assert sent == [IBAN]
