"""An event wait whose timeout policy is "continue" goes on with its declared default as the
step's result (definition.wait_for_event): the next step reads the default itself, as it
would read an event's payload. That no event came is the audit record's to say (and the
step's, finished without an event as its evidence), not a wrapper around the value."""

import pytest

from audit.actions import AuditAction
from audit.models import AuditRecord
from runs.execution import executor
from runs.models import RunStatus, StepStatus
from tests.factories import make_due, new_run, step

pytestmark = pytest.mark.django_db
DEFAULT = {"amount": 0, "reference": "none"}


def test_a_continue_timeout_gives_the_next_step_the_default_itself(script):
    run = new_run("test-payment-continue")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    make_due(run)

    assert executor.advance_run(run.pk, worker="w2") == RunStatus.COMPLETED
    payment = step(run, "payment")
    assert (payment.status, payment.result, payment.remote_ref) == (
        StepStatus.SUCCEEDED, DEFAULT, "")
    # "book" read ctx.results["payment"]: the default, as an event's payload would be.
    assert step(run, "book").result == {"paid": DEFAULT}
    assert [name for name, *_ in script.calls] == ["invoice", "book"]

    (timed_out,) = AuditRecord.objects.filter(run=run, action=AuditAction.EVENT_TIMED_OUT)
    assert timed_out.step_name == "payment"
    assert timed_out.data["policy"] == "continue" and timed_out.data["timed_out"] is True
    assert "no payment.settled event arrived" in timed_out.data["waited"]
    assert not AuditRecord.objects.filter(run=run, action=AuditAction.EVENT_RECEIVED).exists()
