"""What each step will do, in one line: declared per step from the input and earlier
results, stored with the intent checkpoint, shown to people; plain kind and system when
undeclared."""

import pytest

from audit.models import AuditRecord
from demo.workflows import invoice
from runs.definitions.definition import Workflow
from runs.execution import executor
from runs.machine.intentions import intended_action
from runs.models import Step
from tests.factories import new_run
from tests.workflows import OrderIn

pytestmark = pytest.mark.django_db


def test_the_intent_checkpoint_stores_what_the_step_will_do(script):
    run = new_run()
    executor.advance_run(run.pk, worker="w1")
    step = Step.objects.get(run=run, name="create-task")
    assert step.intended_action == "change another system"
    # The record of the attempt's outcome carries what it was to do.
    outcome = AuditRecord.objects.get(run=run, step_name="create-task", action="succeeded")
    assert outcome.data["will_do"] == step.intended_action


def test_a_declared_description_is_computed_from_the_input_and_earlier_results():
    class Bill:
        pk, workflow_name, business_key = 1, "invoice-approval", "t:1"
        input = {"tenant": "t", "invoice_number": "INV-1", "approver_email": "a@example.com"}

    class Row:
        def __init__(self, name, result=None, status="succeeded"):
            self.name, self.result, self.status = name, result, status
            self.idempotency_key, self.attempt, self.remote_ref = "k", 1, ""
            self.compensation_key, self.compensation_attempt = "c", 0

    rows = [Row("read-invoice", {"number": "INV-1", "vendor": "ACME", "amount": "1200.00",
                                 "currency": "EUR"}),
            Row("classify", {"category": "software", "approver_group": "it"}),
            Row("post-ledger-entry", status="pending")]
    line = intended_action(invoice, invoice.step("post-ledger-entry"), Bill(), rows, rows[2])
    assert line == "post 1,200.00 EUR to expenses:software for invoice INV-1"


def test_a_description_that_fails_says_so_and_does_not_stop_the_step(script):
    flaky = Workflow("test-describe-fails", version=1, input=OrderIn, register=False)

    @flaky.write("charge", system="payments")
    def charge(ctx):
        return {}

    @charge.describe
    def describe(ctx):
        raise KeyError("no amount yet")

    class R:
        pk, workflow_name, business_key, input = 1, "x", "k", {"order": "o"}

    class S:
        name, result, status, idempotency_key, attempt, remote_ref = "charge", None, \
            "pending", "k", 0, ""

    assert intended_action(flaky, charge, R(), [S()], S()) == \
        "change in payments (its description failed: KeyError)"
