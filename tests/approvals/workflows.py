"""Approval workflows with the other timeout policies (tests.workflows has test-approval,
which rejects at its timeout)."""

from datetime import timedelta

from runs.definitions.definition import Workflow
from tests.workflows import FAST, OrderIn, script


def _prepare(ctx):
    script.calls.append((ctx.step, ctx.key, ctx.attempt))
    return {"order": ctx.input.order}


def _snapshot(ctx):
    return {"order": ctx.results["prepare"]["order"], "amount": ctx.input.amount,
            "currency": "EUR", "reasons": ["known vendor", "<b>bold</b> & co"]}


def _pay(ctx):
    script.calls.append((ctx.step, ctx.key, ctx.attempt))
    ref = script.effects.setdefault(ctx.key, f"pay-{len(script.effects) + 1}")
    return {"ref": ref}


escalating = Workflow("test-approval-escalate", version=1, input=OrderIn)
escalating.read("prepare", retry=FAST)(_prepare)
escalating.approval("approve", approvers=("group:approvers",), remind_every=timedelta(hours=8),
                    timeout=timedelta(days=2), on_timeout="escalate",
                    escalate_to=("group:finance-deputies",))(_snapshot)
escalating.write("pay", retry=FAST, honours_key=True)(_pay)

cancelling = Workflow("test-approval-cancel", version=1, input=OrderIn)
cancelling.read("prepare", retry=FAST)(_prepare)
cancelling.approval("approve", approvers=("user:ann",), remind_every=timedelta(hours=12),
                    timeout=timedelta(days=1), on_timeout="cancel")(_snapshot)
cancelling.write("pay", retry=FAST, honours_key=True)(_pay)


# Invoices under 1,000 EUR need no approver: the step's rule approves them, a person the rest.
NO_APPROVER_UNDER = 1000


def _pay_what_was_approved(ctx):
    # Reads the approval as a later step does, whoever gave it.
    approval = ctx.results["approve"]
    script.calls.append((ctx.step, ctx.key, ctx.attempt, approval["approved"], approval["by"]))
    ref = script.effects.setdefault(ctx.key, f"pay-{len(script.effects) + 1}")
    return {"ref": ref}


ruled = Workflow("test-approval-by-rule", version=1, input=OrderIn)
ruled.read("prepare", retry=FAST)(_prepare)
ruled.approval("approve", approvers=("group:approvers",), on_timeout="reject",
               approve_if=lambda snapshot: snapshot["amount"] >= NO_APPROVER_UNDER)(_snapshot)
ruled.write("pay", retry=FAST, honours_key=True)(_pay_what_was_approved)
