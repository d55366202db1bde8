"""A sleep, an event wait and an agent step change nothing of their own: their recovery
contract (the table `recovery_contract` prints, the workflow page and each step of the run
page show) says what they do and when they stop, not a write's "changes another system",
"nothing can tell whether it happened" and "any unknown outcome". An agent whose tools
change something needs an owner in its contract, as a write step does."""

from datetime import timedelta

from django.core.management import call_command
from pydantic import BaseModel

from runs.definitions.contracts import GO, RETRY_IS_SAFE, STOP, contract_table, workflow_verdict
from runs.definitions.definition import (
    READ,
    WRITE,
    AgentBudget,
    Found,
    Workflow,
)


class In(BaseModel):
    x: int = 0


class Args(BaseModel):
    name: str


def _workflow(*, blind_tool: bool = False) -> Workflow:
    wf = Workflow("contract-of-waits", version=1, input=In, register=False)
    wf.sleep("cool-off", duration=timedelta(minutes=5))
    wf.wait_for_event("paid", event="payment.settled", timeout=timedelta(hours=2),
                      on_timeout="fail")
    wf.wait_for_event("signed", event="contract.signed")
    wf.approval("sign-off", approvers=("group:approvers",), timeout=timedelta(hours=36),
                on_timeout="reject")(lambda ctx: {})
    agent = wf.agent("triage", system_prompt="Triage it.",
                     budget=AgentBudget(max_turns=4, max_tool_calls=6, max_tokens=9000),
                     schema_error_budget=1)
    agent.tool("look-up", kind=READ, args=Args)(lambda ctx, args: {})
    task = agent.tool("open-task", kind=WRITE, honours_key=not blind_tool,
                      args=Args)(lambda ctx, args: {})
    if not blind_tool:
        task.reconcile(lambda ctx, args: Found("T-1"))
    reader = wf.agent("reader", system_prompt="Read it.")
    reader.tool("look-up", kind=READ, args=Args)(lambda ctx, args: {})
    return wf


def test_a_sleep_and_an_event_wait_change_nothing_and_stop_only_as_they_declare():
    table = {c.step: c for c in contract_table(_workflow())}
    sleep, paid, signed = table["cool-off"], table["paid"], table["signed"]
    for wait in (sleep, paid, signed):
        assert wait.side_effect.startswith("none")
        assert wait.safe_to_rerun.startswith("yes")
        assert wait.classification == RETRY_IS_SAFE
        assert "unknown outcome" not in wait.stop_condition
        assert "attempts" not in wait.stop_condition
    assert "wakes at its time" in sleep.stop_condition
    # A time as people read it ("2 hours", "36 hours"), not Python's "2:00:00" and
    # "1 day, 12:00:00".
    assert paid.stop_condition == "no event within 2 hours: fail"
    assert table["sign-off"].stop_condition == "no decision within 36 hours: reject"
    assert "until the event comes" in signed.stop_condition


def test_an_agent_says_which_tools_change_something_and_stops_by_its_own_budgets():
    table = {c.step: c for c in contract_table(_workflow())}
    agent = table["triage"]
    assert agent.side_effect == "yes: through its tools (open-task)"
    assert agent.safe_to_rerun.startswith("yes: its turns are stored and reused")
    assert "its budget spent (4 turns, 6 tool calls or 9000 tokens)" in agent.stop_condition
    assert "more than 1 schema error" in agent.stop_condition
    assert "any unknown outcome" not in agent.stop_condition
    assert table["reader"].side_effect == "none (its tools read)"


def test_an_agent_with_a_tool_nothing_can_settle_names_that_tool():
    agent = {c.step: c for c in contract_table(_workflow(blind_tool=True))}["triage"]
    assert agent.safe_to_rerun == "no: nothing can tell whether a call of open-task happened"
    assert "any unknown outcome of a call of open-task" in agent.stop_condition


def test_the_command_describes_the_demo_agent_by_its_tools(capsys):
    call_command("recovery_contract", "invoice-triage")
    row = next(line for line in capsys.readouterr().out.splitlines()
               if line.startswith("| triage"))
    assert "through its tools (open-approval-task, post-ledger)" in row
    assert "nothing can tell" not in row


def test_an_agent_whose_tools_change_something_needs_an_owner_as_a_write_does():
    verdict = workflow_verdict(_workflow())
    assert verdict.decision == STOP
    assert verdict.reason == "triage has no owner to decide when it goes wrong"
    assert verdict.next_action == "name an owner in the recovery contract of triage"


def test_an_agent_whose_tools_only_read_needs_no_owner():
    wf = Workflow("contract-of-a-reader", version=1, input=In, register=False)
    reader = wf.agent("reader", system_prompt="Read it.")
    reader.tool("look-up", kind=READ, args=Args)(lambda ctx, args: {})
    assert workflow_verdict(wf).decision == GO
