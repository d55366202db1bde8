"""The invoice-triage agent: a model that chooses its own tools, each call a checkpointed,
keyed effect.

The agent reads the invoice, looks the vendor up, opens the approval task in the tracker
and posts the invoice to the ledger; a ledger posting at or above THRESHOLD waits for a
person's approval of exactly its arguments first. All over real HTTP to the sandbox, whose
model endpoint plays the agent deterministically (demo.sandbox.agent_model). After the
agent, the requester is told by email: a late step whose failure undoes the agent's
effects, newest first.
"""

from datetime import timedelta
from decimal import Decimal

from pydantic import BaseModel, EmailStr, Field

from runs.definitions.definition import (
    HIGH,
    READ,
    WRITE,
    AgentBudget,
    Contract,
    Found,
    NotFound,
    StepResult,
    Workflow,
    tool_approval,
)
from runs.definitions.retry import RetryPolicy
from runs.machine.errors import PermanentError

from .clients import build_services

# Ledger postings of this amount or more wait for a person's approval of their arguments.
THRESHOLD = Decimal("1000.00")
MONEY = r"^-?\d{1,10}\.\d{2}$"


class TriageIn(BaseModel):
    tenant: str = Field(min_length=1, max_length=100)
    invoice_number: str = Field(min_length=1, max_length=100)
    requester_email: EmailStr
    # Extra instructions for the agent (the sandbox's model reads test scripts from here).
    notes: str = Field(default="", max_length=500)


class ReadInvoiceArgs(BaseModel):
    number: str = Field(min_length=1, max_length=100)


class LookupVendorArgs(BaseModel):
    name: str = Field(min_length=1, max_length=200)


class ApprovalTaskArgs(BaseModel):
    invoice: str = Field(min_length=1, max_length=100)
    vendor: str = Field(min_length=1, max_length=200)
    amount: str = Field(pattern=MONEY)
    currency: str = Field(min_length=3, max_length=3)
    category: str = Field(min_length=1, max_length=40)


class PostLedgerArgs(BaseModel):
    invoice: str = Field(min_length=1, max_length=100)
    account: str = Field(pattern=r"^expenses:[a-z-]+$")
    amount: str = Field(pattern=MONEY)
    currency: str = Field(min_length=3, max_length=3)
    iban: str = Field(min_length=5, max_length=40)


triage_invoices = Workflow(
    "invoice-triage", version=1, input=TriageIn, services=build_services,
    # Below the approval threshold, so a drill's worker runs it end to end in one go.
    example={"tenant": "tenant-42", "invoice_number": "INV-2001",
             "requester_email": "requester@example.com"},
    # 3,924.01 EUR: the ledger posting waits for a person (the drill kit's approval drill).
    approval_example={"tenant": "tenant-42", "invoice_number": "INV-1847",
                      "requester_email": "requester@example.com"},
)

triage = triage_invoices.agent(
    "triage",
    system_prompt=(
        "You triage supplier invoices. Read the invoice, look its vendor up, open an "
        "approval task for the approvers, then post the invoice to the ledger on the "
        "account expenses:<category>. Finish with a one-line summary."),
    budget=AgentBudget(max_turns=8, max_tool_calls=10, max_tokens=20_000),
    schema_error_budget=2,
    contract=Contract(evidence="each tool call's remote reference (task id, ledger entry)",
                      rule="reconcile each call by its key; a person approves postings "
                           f"from {THRESHOLD} EUR", owner="finance-ops"),
    # Its turns keep the model endpoint's rate limit and Retry-After, where one is declared
    # (runs.machine.limits.rate_limit("the model", per_second=N)).
    model_system="the model",
)


@triage.prompt
def triage_task(ctx):
    notes = f"\n{ctx.input.notes}" if ctx.input.notes else ""
    return f"Triage invoice {ctx.input.invoice_number} of {ctx.input.tenant}.{notes}"


@triage.tool("read-invoice", kind=READ, args=ReadInvoiceArgs,
             retry=RetryPolicy(maximum_attempts=5))
def read_invoice(ctx, args):
    """Read an invoice by its number: vendor, amount, currency, lines."""
    return ctx.services.invoices.get(args.number)


@triage.tool("lookup-vendor", kind=READ, args=LookupVendorArgs, sensitive=("iban",))
def lookup_vendor(ctx, args):
    """Look a vendor up by name in the vendor registry: status and bank account."""
    found = ctx.services.vendors.find(args.name)
    if found is None:
        raise PermanentError(f"no vendor named {args.name!r} in the registry")
    return found


@triage.tool("open-approval-task", kind=WRITE, honours_key=True, args=ApprovalTaskArgs,
             system="the task tracker", retry=RetryPolicy(initial_interval=1,
                                                          maximum_attempts=5))
def open_approval_task(ctx, args):
    """Open the task in which the approvers approve the invoice."""
    task = ctx.services.tracker.create_task(
        key=ctx.key, title=f"Approve invoice {args.invoice} from {args.vendor}",
        assignee="finance-approvers",
        details={"amount": args.amount, "currency": args.currency,
                 "category": args.category})
    return StepResult(task, remote_ref=task["id"])


@open_approval_task.reconcile
def find_approval_task(ctx, args):
    task = ctx.services.tracker.find_task(ctx.key)
    return Found(task["id"], task) if task else NotFound()


@open_approval_task.compensate
def cancel_approval_task(ctx, args):
    task = ctx.services.tracker.cancel_task(ctx.remote_ref, reason="invoice triage undone",
                                            key=ctx.key)
    return StepResult(task, remote_ref=task["id"])


@triage.tool("post-ledger", kind=WRITE, impact=HIGH, honours_key=True, args=PostLedgerArgs,
             redact=("iban",), system="the ledger",
             approve_if=lambda args: Decimal(args.amount) >= THRESHOLD,
             # Asked like the invoice workflow's approve-invoice step: the approvers by
             # email, reminded, escalated to the deputies; nobody deciding declines it.
             approval=tool_approval(approvers=("group:approvers",),
                                    remind_every=timedelta(hours=8), timeout=timedelta(days=2),
                                    on_timeout="escalate",
                                    escalate_to=("group:finance-deputies",)))
def post_ledger(ctx, args):
    """Post the invoice to the ledger (the amount as a decimal string, e.g. "120.00")."""
    entry = ctx.services.ledger.post(
        transaction_ref=ctx.key, account=args.account, amount=args.amount,
        currency=args.currency, memo=f"invoice {args.invoice}")
    return StepResult(entry, remote_ref=entry["id"])


@post_ledger.reconcile
def find_ledger_entry(ctx, args):
    entry = ctx.services.ledger.find(ctx.key)
    return Found(entry["id"], entry) if entry else NotFound()


@post_ledger.compensate
def reverse_ledger_entry(ctx, args):
    entry = ctx.services.ledger.post(
        transaction_ref=ctx.key, account=args.account, amount=-Decimal(args.amount),
        currency=args.currency, memo=f"reversal of {ctx.remote_ref}", reverses=ctx.remote_ref)
    return StepResult(entry, remote_ref=entry["id"])


# Low impact: an informational note to the person who sent the invoice in (after a lookup
# that finds nothing it is sent again, once the messenger has had two seconds to land it).
@triage_invoices.notify("tell-requester", impact="low", lookup_delay=2.0,
                        system="the messenger",
                        contract=Contract(evidence="provider message id",
                                          rule="reconcile by client reference",
                                          owner="finance-ops"))
def tell_requester(ctx):
    message = ctx.services.messenger.send(
        to=ctx.input.requester_email, client_reference=ctx.key,
        subject=f"Invoice {ctx.input.invoice_number} triaged",
        body=ctx.results["triage"]["answer"])
    return StepResult(message, remote_ref=message["id"])


@tell_requester.reconcile
def find_requester_message(ctx):
    sent = ctx.services.messenger.find(ctx.key)
    return Found(sent[0]["id"], sent[0]) if sent else NotFound()
