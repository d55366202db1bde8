"""Workflows that sleep, wait for a person or for an event before their writes to the
sandbox's ledger, for the drill kit's tests (imported by worker processes through
RUNS_WORKFLOW_MODULES)."""

from datetime import timedelta

from pydantic import BaseModel

from demo.clients import build_services
from runs.definitions.definition import Contract, Found, NotFound, StepResult, Workflow
from tests.workflows import OrderIn

LEDGER = Contract(evidence="ledger entry", rule="reconcile by key", owner="ops")


def post_to_the_ledger(ctx):
    entry = ctx.services.ledger.post(transaction_ref=ctx.key, account="expenses:services",
                                     amount="5.00", currency="EUR", memo=ctx.input.order)
    return StepResult(entry, remote_ref=entry["id"])


def find_in_the_ledger(ctx):
    entry = ctx.services.ledger.find(ctx.key)
    return Found(entry["id"], entry) if entry else NotFound()


def _declare_post(workflow: Workflow) -> None:
    post = workflow.write("post", honours_key=True, system="the ledger",
                          contract=LEDGER)(post_to_the_ledger)
    post.reconcile(find_in_the_ledger)


sleeps = Workflow("test-drill-sleeps", version=1, input=OrderIn, services=build_services,
                  example={"order": "drill"})
sleeps.sleep("cool-off", duration=timedelta(days=1))
_declare_post(sleeps)


def reverse_the_entry(ctx):
    entry = ctx.services.ledger.post(transaction_ref=ctx.key, account="expenses:services",
                                     amount="-5.00", currency="EUR",
                                     memo=f"reversal of {ctx.remote_ref}",
                                     reverses=ctx.remote_ref)
    return StepResult(entry, remote_ref=entry["id"])


def charge_the_fee(ctx):
    entry = ctx.services.ledger.post(transaction_ref=ctx.key, account="expenses:fees",
                                     amount="1.00", currency="EUR", memo=ctx.input.order)
    return StepResult(entry, remote_ref=entry["id"])


def post_what_was_paid(ctx):
    # Reads the event's payload: a run that went on without it fails here.
    entry = ctx.services.ledger.post(transaction_ref=ctx.key, account="expenses:services",
                                     amount=ctx.results["paid"]["amount"], currency="EUR",
                                     memo=ctx.input.order)
    return StepResult(entry, remote_ref=entry["id"])


def _declare_undoable_post(workflow: Workflow, post_fn=post_to_the_ledger) -> None:
    post = workflow.write("post", honours_key=True, system="the ledger",
                          contract=LEDGER)(post_fn)
    post.reconcile(find_in_the_ledger)
    post.compensate(reverse_the_entry)


class Verdict(BaseModel):
    verdict: str


class Payment(BaseModel):
    amount: str


def decide(ctx):
    return {"verdict": "post"}


# Approve, then post: the usual shape.
approves = Workflow("test-drill-approves", version=1, input=OrderIn, services=build_services,
                    example={"order": "drill"})
approves.read("look-up")(lambda ctx: {"order": ctx.input.order})
approves.approval("approve-order", approvers=("group:approvers",), on_timeout="reject")(
    lambda ctx: {"order": ctx.input.order})
_declare_undoable_post(approves)

def _declare_approved_by_rule(workflow: Workflow) -> None:
    # A rule that needs no approver under 1,000: the examples' 100 passes by it.
    workflow.read("look-up")(lambda ctx: {"order": ctx.input.order})
    workflow.approval("approve-order", approvers=("group:approvers",), on_timeout="reject",
                      approve_if=lambda snapshot: snapshot["amount"] >= 1000)(
        lambda ctx: {"order": ctx.input.order, "amount": ctx.input.amount})
    _declare_undoable_post(workflow)


# The same, with that rule: the example passes by it, and no input a person is asked about
# is declared.
approves_by_rule = Workflow("test-drill-approves-by-rule", version=1, input=OrderIn,
                            services=build_services, example={"order": "drill"})
_declare_approved_by_rule(approves_by_rule)

# And with an approval_example of 1,000, which the rule asks a person about.
approves_by_rule_or_asks = Workflow(
    "test-drill-approves-by-rule-or-asks", version=1, input=OrderIn, services=build_services,
    example={"order": "drill"}, approval_example={"order": "drill-large", "amount": 1000})
_declare_approved_by_rule(approves_by_rule_or_asks)

# An event whose wait declares a default, a decision and a sleep before two writes, the first
# (which posts the amount the event says) undone when the second fails.
settles = Workflow("test-drill-settles", version=1, input=OrderIn, services=build_services,
                   example={"order": "drill"})
settles.wait_for_event("paid", event="payment.settled", schema=Payment,
                       timeout=timedelta(minutes=10), on_timeout="continue",
                       default={"amount": "5.00"})
settles.decision("decide", schema=Verdict)(decide)
settles.sleep("cool-off", duration=timedelta(days=1))
_declare_undoable_post(settles, post_what_was_paid)
fee = settles.write("charge-fee", honours_key=True, system="the ledger",
                    contract=LEDGER)(charge_the_fee)
fee.reconcile(find_in_the_ledger)

# A decision that nothing calling anything follows: no worker crashes after it is stored.
decides_last = Workflow("test-drill-decides-last", version=1, input=OrderIn,
                        services=build_services, example={"order": "drill"})
_declare_post(decides_last)
decides_last.decision("decide", schema=Verdict)(decide)
decides_last.sleep("cool-off", duration=timedelta(days=1))

# An event whose wait declares no default before a write that reads its payload: only the
# sender knows what it says, so no drill gets past it.
awaits_payment = Workflow("test-drill-awaits-payment", version=1, input=OrderIn,
                          services=build_services, example={"order": "drill"})
awaits_payment.wait_for_event("paid", event="payment.settled", schema=Payment,
                              timeout=timedelta(minutes=10))
_declare_undoable_post(awaits_payment, post_what_was_paid)
