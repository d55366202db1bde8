"""An undo (a compensation) returns what PostgreSQL cannot store (a NUL in its remote
reference, a reference whose text cannot be read), or fails with an error class of the step
code's own that no column holds. Its outcome is checked as a step's is: the checkpoint
commits, the undo fails unclassified with the problem named, the run goes to a person
(compensation failed), and the undo is not sent again at every attempt."""

import pytest

from runs.definitions.definition import StepResult
from runs.execution import executor
from runs.machine.errors import PermanentError, StepError
from runs.models import AttentionReason, ErrorClass, RunStatus, StepStatus
from tests.factories import new_run, step
from tests.workflows import saga

pytestmark = pytest.mark.django_db(transaction=True)


class Unreadable:
    def __str__(self):
        raise RuntimeError("no text for this reference")


class ErrorOfItsOwnClass(StepError):
    error_class = "a_class_of_its_very_own"  # longer than the column's 16 characters


def _raise(exc):
    raise exc


UNDOS = {
    "nul-in-ref": (lambda: StepResult({"undone": True}, remote_ref="U\x00"),
                   "undo returned a value that cannot be stored: NUL characters cannot be "
                   "stored (in its remote reference)"),
    "unreadable-ref": (lambda: StepResult({"undone": True}, remote_ref=Unreadable()),
                       "undo returned a remote reference that cannot be read as text: "
                       "RuntimeError: no text for this reference"),
    "nul-in-value": (lambda: {"note": "half\x00undone"},
                     "undo returned a value that cannot be stored: NUL characters cannot be "
                     "stored (at $.note)"),
    "class-of-its-own": (lambda: _raise(ErrorOfItsOwnClass("refund queue rejected it")),
                         "ErrorOfItsOwnClass: refund queue rejected it"),
}


@pytest.mark.parametrize("undo", UNDOS, ids=list(UNDOS))
def test_an_undo_that_cannot_be_recorded_fails_once_for_a_person(script, monkeypatch, undo):
    script.reset()
    make_outcome, problem = UNDOS[undo]
    sent = []

    def refund(ctx):
        sent.append(ctx.key)
        return make_outcome()

    monkeypatch.setattr(saga.step("charge-card"), "compensate_fn", refund)
    script.plan["book-shipment"] = [PermanentError("carrier refused the parcel")]
    run = new_run("test-saga")
    # The checkpoint commits: advance_run returns, the compensation stopped for a person.
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPENSATION_FAILED
    run.refresh_from_db()
    charge = step(run, "charge-card")
    assert run.attention_reason == AttentionReason.COMPENSATION_FAILED
    assert charge.status == StepStatus.COMPENSATION_FAILED
    assert charge.error_class == ErrorClass.UNCLASSIFIED
    assert problem in charge.error_message and problem in run.status_message
    assert charge.compensation_ref == "" and charge.compensation_attempt == 1
    # Sent once; the undo before it in the plan is not sent after the failure.
    assert sent == [charge.compensation_key]
    assert "reserve-stock:compensate" not in [call[0] for call in script.calls]
    assert step(run, "reserve-stock").status == StepStatus.SUCCEEDED
    assert run.lease_owner == ""
    assert executor.advance_run(run.pk, worker="w1") is None
    assert len(sent) == 1
