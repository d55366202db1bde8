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
