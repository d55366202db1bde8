"""The example workflows, calling the sandbox's systems over HTTP through demo.clients.

Users' own workflows live in their own apps, as these do: a Workflow, its steps, and for each
side-effecting step how to look its effect up (reconcile) and, where the business allows,
how to undo it (compensate).
"""

from datetime import timedelta
from decimal import Decimal
from typing import Literal

from pydantic import BaseModel, EmailStr, Field

from runs.definitions.definition import Contract, Found, NotFound, StepResult, Workflow
from runs.definitions.retry import RetryPolicy

from .clients import build_services


def _found_or_not(obj: dict | None, ref_field: str = "id"):
    return Found(obj[ref_field], obj) if obj else NotFound()


# --- invoice approval ---------------------------------------------------------------------

class InvoiceIn(BaseModel):
    tenant: str = Field(min_length=1, max_length=100)
    invoice_number: str = Field(min_length=1, max_length=100)
    approver_email: EmailStr


class Classification(BaseModel):
    category: Literal["office-supplies", "software", "travel", "services"]
    confidence: float = Field(ge=0, le=1)
    reasons: list[str]
    approver_group: str


invoice = Workflow(
    "invoice-approval", version=1, input=InvoiceIn, services=build_services,
    auto_compensate=True,
    example={"tenant": "tenant-42", "invoice_number": "INV-1847",
             "approver_email": "approver@example.com"},
)


@invoice.read("read-invoice", retry=RetryPolicy(maximum_attempts=5),
              contract=Contract(evidence="the invoice document", rule="retry",
                                owner="finance-ops"))
def read_invoice(ctx):
    return ctx.services.invoices.get(ctx.input.invoice_number)


@invoice.decision("classify", schema=Classification, format_failure_budget=2,
                  retry=RetryPolicy(maximum_attempts=4),
                  contract=Contract(evidence="the stored, schema-valid classification",
                                    rule="reuse the stored decision; ask again only by an "
                                         "operator", owner="finance-ops"))
def classify(ctx):
    return ctx.services.model.classify_invoice(ctx.results["read-invoice"])


@invoice.write("create-approval-task", honours_key=True, system="the task tracker",
               retry=RetryPolicy(initial_interval=1, maximum_attempts=5),
               contract=Contract(evidence="task id in the tracker", rule="reconcile by key",
                                 owner="finance-ops"))
def create_approval_task(ctx):
    bill, decision = ctx.results["read-invoice"], ctx.results["classify"]
    task = ctx.services.tracker.create_task(
        key=ctx.key, title=f"Approve invoice {bill['number']} from {bill['vendor']}",
        assignee=decision["approver_group"],
        details={"amount": bill["amount"], "currency": bill["currency"],
                 "category": decision["category"], "reasons": decision["reasons"]},
    )
    return StepResult(task, remote_ref=task["id"])


@create_approval_task.describe
def describe_approval_task(ctx):
    bill, decision = ctx.results["read-invoice"], ctx.results["classify"]
    return (f"create a task for {decision['approver_group']} to approve invoice "
            f"{bill['number']} from {bill['vendor']} in the tracker")


@create_approval_task.reconcile
def find_approval_task(ctx):
    return _found_or_not(ctx.services.tracker.find_task(ctx.key))


@create_approval_task.compensate
def cancel_approval_task(ctx):
    task = ctx.services.tracker.cancel_task(ctx.remote_ref, reason="invoice run compensated",
                                            key=ctx.key)
    return StepResult(task, remote_ref=task["id"])


@invoice.notify("notify-approver", system="the messenger",
                contract=Contract(evidence="provider message id",
                                  rule="reconcile by client reference (the messenger ignores "
                                       "keys)", owner="finance-ops"))
def notify_approver(ctx):
    bill = ctx.results["read-invoice"]
    message = ctx.services.messenger.send(
        to=ctx.input.approver_email, client_reference=ctx.key,
        subject=f"Invoice {bill['number']} waits for your approval",
        body=f"{bill['vendor']}, {bill['amount']} {bill['currency']}: task "
             f"{ctx.results['create-approval-task']['id']}.",
    )
    return StepResult(message, remote_ref=message["id"])


@notify_approver.describe
def describe_notification(ctx):
    return (f"email {ctx.input.approver_email} that invoice "
            f"{ctx.results['read-invoice']['number']} waits for approval")


@notify_approver.reconcile
def find_notification(ctx):
    sent = ctx.services.messenger.find(ctx.key)
    return Found(sent[0]["id"], sent[0]) if sent else NotFound()


@notify_approver.compensation_preview
def correction(ctx):
    """The correction message, built without sending it: a person sees it before it goes."""
    bill = ctx.results["read-invoice"]
    return {"to": ctx.input.approver_email,
            "subject": f"Disregard: invoice {bill['number']} no longer needs your approval",
            "body": "The approval request was withdrawn."}


@notify_approver.compensate
def send_correction(ctx):
    # The correction's own key is its client reference: looked up before sending again.
    sent = ctx.services.messenger.find(ctx.key)
    message = sent[0] if sent else ctx.services.messenger.send(
        client_reference=ctx.key, **correction(ctx))
    return StepResult(message, remote_ref=message["id"])


@invoice.approval("approve-invoice", approvers=("group:approvers",),
                  remind_every=timedelta(hours=8), timeout=timedelta(days=2),
                  on_timeout="escalate", escalate_to=("group:finance-deputies",),
                  contract=Contract(evidence="the approver's decision", rule="human decision",
                                    owner="finance-approvers"))
def approve_invoice(ctx):
    """What the approver sees and approves: the invoice and the model's classification."""
    bill, decision = ctx.results["read-invoice"], ctx.results["classify"]
    return {"invoice": bill["number"], "vendor": bill["vendor"], "amount": bill["amount"],
            "currency": bill["currency"], "category": decision["category"],
            "confidence": decision["confidence"], "reasons": decision["reasons"],
            "task": ctx.results["create-approval-task"]["id"]}


@invoice.write("post-ledger-entry", impact="high", honours_key=True, system="the ledger",
               contract=Contract(evidence="ledger entry id for the transaction reference",
                                 rule="reconcile by transaction reference; a person confirms "
                                      "anything unsettled",
                                 owner="finance-ops"))
def post_ledger_entry(ctx):
    bill, decision = ctx.results["read-invoice"], ctx.results["classify"]
    entry = ctx.services.ledger.post(
        transaction_ref=ctx.key, account=f"expenses:{decision['category']}",
        amount=bill["amount"], currency=bill["currency"],
        memo=f"invoice {bill['number']} from {bill['vendor']}",
    )
    return StepResult(entry, remote_ref=entry["id"])


@post_ledger_entry.describe
def describe_ledger_entry(ctx):
    bill, decision = ctx.results["read-invoice"], ctx.results["classify"]
    return (f"post {Decimal(bill['amount']):,.2f} {bill['currency']} to "
            f"expenses:{decision['category']} for invoice {bill['number']}")


@post_ledger_entry.reconcile
def find_ledger_entry(ctx):
    return _found_or_not(ctx.services.ledger.find(ctx.key))


@post_ledger_entry.compensate
def reverse_ledger_entry(ctx):
    bill = ctx.results["read-invoice"]
    entry = ctx.services.ledger.post(
        transaction_ref=ctx.key, account=f"expenses:{ctx.results['classify']['category']}",
        amount=-Decimal(bill["amount"]), currency=bill["currency"],
        memo=f"reversal of {ctx.remote_ref}", reverses=ctx.remote_ref,
    )
    return StepResult(entry, remote_ref=entry["id"])


# --- customer onboarding ------------------------------------------------------------------

class OnboardingIn(BaseModel):
    email: EmailStr
    name: str = Field(min_length=1, max_length=200)
    plan: Literal["free", "pro", "enterprise"]


onboarding = Workflow(
    "customer-onboarding", version=1, input=OnboardingIn, services=build_services,
    example={"email": "ada@example.com", "name": "Ada Lovelace", "plan": "pro"},
)


@onboarding.write(
    "create-customer", honours_key=True, retry=RetryPolicy(maximum_attempts=5),
    system="the customer system",
    contract=Contract(evidence="customer id in the customer system", rule="reconcile by key",
                      owner="customer-ops"),
)
def create_customer(ctx):
    customer = ctx.services.customers.create(key=ctx.key, email=ctx.input.email,
                                             name=ctx.input.name, plan=ctx.input.plan)
    return StepResult(customer, remote_ref=customer["id"])


@create_customer.reconcile
def find_customer(ctx):
    return _found_or_not(ctx.services.customers.find(ctx.key))


@onboarding.notify(
    "send-confirmation-email", system="the messenger",
    contract=Contract(evidence="provider message id", rule="reconcile by client reference",
                      owner="customer-ops"),
)
def send_confirmation(ctx):
    message = ctx.services.messenger.send(
        to=ctx.input.email, client_reference=ctx.key, subject=f"Welcome, {ctx.input.name}",
        body=f"Your {ctx.input.plan} account is ready "
             f"({ctx.results['create-customer']['id']}).",
    )
    return StepResult(message, remote_ref=message["id"])


@send_confirmation.reconcile
def find_confirmation(ctx):
    sent = ctx.services.messenger.find(ctx.key)
    return Found(sent[0]["id"], sent[0]) if sent else NotFound()


@onboarding.write(
    "update-payment-status", impact="high", honours_key=True, system="payments",
    contract=Contract(evidence="payment update id", rule="human confirmation after an unknown "
                      "outcome", owner="finance-ops"),
)
def update_payment_status(ctx):
    status = "trial" if ctx.input.plan == "free" else "awaiting_payment"
    update = ctx.services.payments.update(
        key=ctx.key, customer_id=ctx.results["create-customer"]["id"], status=status)
    return StepResult(update, remote_ref=update["id"])


@update_payment_status.reconcile
def find_payment_update(ctx):
    return _found_or_not(ctx.services.payments.find(ctx.key))


# The invoice-triage agent (its own module: an agent step and its tools).
from . import agent_workflow  # noqa: E402, F401
