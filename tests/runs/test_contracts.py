"""The recovery contract table and the workflow verdict follow from the declarations."""

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from pydantic import BaseModel

from runs.definitions.contracts import (
    GO,
    LIMITED_TRIAL,
    NEEDS_COMPENSATION,
    NEEDS_PERSON,
    RETRY_IS_SAFE,
    STOP,
    contract_table,
    workflow_verdict,
)
from runs.definitions.definition import Contract, Workflow


class In(BaseModel):
    x: int = 0


def _workflow(*, ledger_reconciles: bool, ledger_impact="high", owner="finance"):
    wf = Workflow("contract-check", version=1, input=In, register=False)

    @wf.read("read")
    def read(ctx):
        return {}

    @wf.write("create-task", honours_key=True, contract=Contract(owner="ops"))
    def create(ctx):
        return {}

    @create.compensate
    def cancel(ctx):
        return {}

    @wf.write("post-ledger-entry", impact=ledger_impact,
              contract=Contract(evidence="transaction reference", owner=owner))
    def post(ctx):
        return {}

    if ledger_reconciles:
        post.reconcile(lambda ctx: None)
    return wf


def test_each_step_is_classified_from_its_declaration():
    table = {c.step: c for c in contract_table(_workflow(ledger_reconciles=True))}
    assert table["read"].classification == RETRY_IS_SAFE
    assert table["create-task"].classification == NEEDS_COMPENSATION
    assert table["post-ledger-entry"].classification == NEEDS_PERSON
    assert table["read"].side_effect.startswith("none")
    assert table["post-ledger-entry"].safe_to_rerun.startswith("only after a lookup")


def test_a_write_that_nothing_can_settle_stops_the_workflow_naming_the_fix():
    verdict = workflow_verdict(_workflow(ledger_reconciles=False, ledger_impact="low"))
    assert verdict.decision == STOP
    assert "post-ledger-entry has no reconcile function and its receiver ignores keys" \
        in verdict.reason
    assert "transaction reference" in verdict.next_action


def test_high_impact_steps_make_a_limited_trial_and_low_impact_ones_a_go():
    assert workflow_verdict(_workflow(ledger_reconciles=True)).decision == LIMITED_TRIAL
    assert workflow_verdict(_workflow(ledger_reconciles=True, ledger_impact="low")).decision \
        == GO


def test_a_side_effect_without_an_owner_stops_the_workflow():
    verdict = workflow_verdict(_workflow(ledger_reconciles=True, owner=""))
    assert verdict.decision == STOP and "no owner" in verdict.reason


def test_the_command_prints_the_table_and_the_verdict(capsys):
    call_command("recovery_contract", "customer-onboarding")
    out = capsys.readouterr().out
    assert "| create-customer" in out and "update-payment-status" in out
    assert "verdict: limited trial" in out


def test_the_command_refuses_an_unknown_workflow():
    with pytest.raises(CommandError, match="unknown workflow 'nope'"):
        call_command("recovery_contract", "nope")


def test_the_stop_condition_is_derived_from_the_rules_the_runtime_applies():
    from demo.workflows import invoice

    stops = {c.step: c.stop_condition for c in contract_table(invoice)}
    ledger = stops["post-ledger-entry"]
    # A found entry settles by itself: the contract no longer says "any unknown outcome".
    assert "any unknown outcome" not in ledger
    assert "3 failed lookups by key" in ledger and "a lookup does not find" in ledger
    assert "5 attempts" in ledger and "count alike" in ledger
    assert "its undo, which waits for a person" in ledger
    # A notify step is high impact by default; the demo keeps that default.
    assert invoice.step("notify-approver").impact == "high"
    assert "its undo, which waits for a person" in stops["notify-approver"]
    assert "its undo" not in stops["create-approval-task"]
    # Nothing can look up a write whose receiver ignores keys and that has no lookup.
    unsettled = {c.step: c.stop_condition for c in contract_table(
        _workflow(ledger_reconciles=False))}
    assert "any unknown outcome" in unsettled["post-ledger-entry"]


def test_a_contract_cannot_declare_its_own_stop_condition():
    with pytest.raises(TypeError):
        Contract(stop="any unknown outcome")
