"""Workflows that sleep or wait for an event before their one write to the sandbox's ledger,
for the drill kit's tests (imported by worker processes through RUNS_WORKFLOW_MODULES)."""

from datetime import timedelta

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

waits = Workflow("test-drill-waits", version=1, input=OrderIn, services=build_services,
                 example={"order": "drill"})
waits.wait_for_event("paid", event="payment.settled", timeout=timedelta(days=1))
_declare_post(waits)
