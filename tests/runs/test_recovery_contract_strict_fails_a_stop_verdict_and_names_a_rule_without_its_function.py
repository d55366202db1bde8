"""`manage.py recovery_contract WORKFLOW` exits 0 once the contract is printed, whatever the
verdict: a reading, which the definition_missing runbook also uses to ask whether a version is
known. With --strict it exits 3 when the verdict is stop, so that a CI job can refuse such a
workflow (1 stays for a workflow it cannot find). And a contract whose declared rule names a
lookup by key the step cannot make (a high-impact write, no reconcile function) says so in
one line, instead of showing the rule as if it were followed. A rule that says the step is
never compensated (or never reconciled) claims nothing of the kind: it was flagged as
declaring an undo it has no function for, because the word was matched anywhere in it."""

import io
import subprocess
import sys

import pytest
from django.core.management import CommandError, call_command

from runs.definitions.definition import Contract, StepResult, Workflow
from tests.processes import ROOT, child_env
from tests.workflows import OrderIn

promised = Workflow("test-contract-rule-without-function", version=1, input=OrderIn)


@promised.write("post-payment", impact="high", honours_key=True, system="payments",
                contract=Contract(evidence="payment id", rule="reconcile by key", owner="ops"))
def post_payment(ctx):
    return StepResult({"id": "p-1"}, remote_ref="p-1")


def _paid(ctx):
    return StepResult({"id": "p-2"}, remote_ref="p-2")


def _found(ctx):
    return None


# Rules that say what the step does not do, each beside the function it does have.
disclaimed = Workflow("test-contract-rule-disclaims", version=1, input=OrderIn)
disclaimed.write("refund-by-hand", honours_key=True, system="payments", contract=Contract(
    evidence="payment id", rule="retry with the key; never compensated (a person refunds by "
    "hand)", owner="ops"))(_paid)
disclaimed.write("no-undo", honours_key=True, system="payments", contract=Contract(
    evidence="payment id", rule="not to be compensated: without compensation, a person "
    "decides", owner="ops"))(_paid)
disclaimed.write("unlooked", impact="high", system="payments", contract=Contract(
    evidence="payment id", rule="never reconciled by key; a person checks",
    owner="ops"))(_paid).compensate(_paid)
# A rule that claims an undo, after a clause that negates something else.
claimed = Workflow("test-contract-rule-claims-undo", version=1, input=OrderIn)
claimed.write("pay", honours_key=True, system="payments", contract=Contract(
    evidence="payment id", rule="no retry without the key; compensated by a refund",
    owner="ops"))(_paid).reconcile(_found)


def _contract(*args) -> subprocess.CompletedProcess:
    # The exit status as a CI job sees it: the command in a process of its own.
    return subprocess.run([sys.executable, str(ROOT / "manage.py"), "recovery_contract", *args],
                          cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=60)


def test_strict_exits_3_on_a_stop_verdict_after_printing_the_contract():
    done = _contract("test-unsafe", "--strict")

    assert done.returncode == 3
    assert "verdict: stop: post-unkeyed has no reconcile function" in done.stdout
    assert "the verdict is stop (--strict): add a reconcile function to post-unkeyed" \
        in done.stderr
    assert "Traceback" not in done.stderr


def test_without_strict_a_stop_verdict_is_printed_and_exits_0():
    done = _contract("test-unsafe")

    assert done.returncode == 0, done.stderr
    assert "verdict: stop:" in done.stdout and done.stderr == ""


def test_strict_passes_a_workflow_whose_verdict_is_not_stop():
    out = io.StringIO()
    call_command("recovery_contract", "customer-onboarding", "--strict", stdout=out)
    assert "verdict: limited trial" in out.getvalue()


def test_a_strict_run_against_an_unknown_workflow_still_exits_1():
    with pytest.raises(CommandError, match="unknown workflow 'nope'") as refused:
        call_command("recovery_contract", "nope", "--strict")
    assert refused.value.returncode == 1


def test_a_rule_naming_a_lookup_the_step_cannot_make_is_flagged_in_one_line():
    out = io.StringIO()
    call_command("recovery_contract", "test-contract-rule-without-function", stdout=out)

    flagged = [line for line in out.getvalue().splitlines()
               if line.startswith("rule without a function:")]
    assert flagged == [
        "rule without a function: post-payment: its rule says 'reconcile by key', but it "
        "declares no reconcile function, so nothing looks its effect up by key after an "
        "unknown outcome and a person decides: add one that finds it by ctx.key, or correct "
        "the rule"]
    assert "verdict: limited trial" in out.getvalue()


def test_a_rule_the_step_follows_is_not_flagged():
    out = io.StringIO()
    call_command("recovery_contract", "invoice-approval", stdout=out)
    assert "rule without a function" not in out.getvalue()


def test_a_rule_that_says_the_step_is_never_compensated_or_reconciled_is_not_flagged():
    out = io.StringIO()
    call_command("recovery_contract", "test-contract-rule-disclaims", stdout=out)
    assert "refund-by-hand" in out.getvalue()
    assert "rule without a function" not in out.getvalue()


def test_a_rule_claiming_an_undo_after_a_negated_clause_is_still_flagged():
    out = io.StringIO()
    call_command("recovery_contract", "test-contract-rule-claims-undo", stdout=out)

    flagged = [line for line in out.getvalue().splitlines()
               if line.startswith("rule without a function:")]
    assert flagged == [
        "rule without a function: pay: its rule says 'no retry without the key; compensated "
        "by a refund', but it declares no compensation, so nothing undoes it: add one, or "
        "correct the rule"]
