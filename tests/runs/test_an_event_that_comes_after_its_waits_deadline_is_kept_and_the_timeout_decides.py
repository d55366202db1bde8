"""An event wait's timeout is judged at its deadline, by the database's clock, not when a
worker gets round to it. An event that comes after the deadline, while every worker is down
(the timeout not yet applied), is not delivered: it is kept, as for any run that does not
wait, and the policy decides as it would have at the deadline: "fail" fails the step,
"continue" goes on with the default, "escalate" holds the run for a person, its step still
waiting, and the kept event is then delivered (a late event, as the runbook says). An event
that comes before the deadline is delivered as ever."""

from datetime import timedelta

import pytest
from django.utils import timezone

from audit.chain import Actor
from audit.models import AuditRecord
from runs.execution import executor, sweeper
from runs.machine import transitions
from runs.machine.errors import TransitionNotAllowed
from runs.models import AttentionReason, ExternalEvent, Run, RunStatus, Step, StepStatus
from runs.waiting import events
from tests.factories import new_run, step

pytestmark = pytest.mark.django_db
PAID = {"amount": 5, "reference": "PSP-late"}


def _waiting_past_its_deadline(workflow):
    """A run waiting for payment.settled whose deadline passed five minutes ago, no worker
    having come by since."""
    run = new_run(workflow)
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    past = timezone.now() - timedelta(minutes=5)
    Step.objects.filter(run=run, name="payment").update(next_attempt_at=past)
    Run.objects.filter(pk=run.pk).update(next_wake_at=past)
    return run


def _send(run):
    return events.receive_event(workflow=run.workflow_name, event="payment.settled",
                                key=run.business_key, event_id="late", source="psp",
                                payload=PAID, actor=Actor.system("psp"))


def test_under_fail_the_late_event_is_kept_and_the_step_fails(script):
    run = _waiting_past_its_deadline("test-payment-fail")
    receipt = _send(run)
    assert (receipt.status, receipt.run_id) == ("kept", None)
    assert step(run, "payment").status == StepStatus.WAITING

    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    assert step(run, "payment").status == StepStatus.FAILED
    assert Run.objects.get(pk=run.pk).attention_reason == AttentionReason.EVENT_TIMED_OUT
    assert sweeper.sweep().events == 0
    assert ExternalEvent.objects.get().consumed_at is None
    assert [c[0] for c in script.calls] == ["invoice"]  # "book" never ran


def test_under_continue_the_late_event_is_kept_and_the_run_goes_on_with_the_default(script):
    run = _waiting_past_its_deadline("test-payment-continue")
    assert _send(run).status == "kept"

    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    assert step(run, "payment").result == {"amount": 0, "reference": "none"}
    assert ExternalEvent.objects.get().consumed_at is None


def test_under_escalate_the_late_event_is_delivered_once_the_run_is_held(script):
    run = _waiting_past_its_deadline("test-payment-wait")
    assert _send(run).status == "kept"

    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    assert Run.objects.get(pk=run.pk).attention_reason == AttentionReason.EVENT_TIMED_OUT
    assert sweeper.sweep().events == 1
    assert step(run, "payment").result == PAID
    assert ExternalEvent.objects.get().consumed_run_id == run.pk


def test_an_event_before_the_deadline_is_delivered(script):
    run = new_run("test-payment-fail")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    assert _send(run) == events.Receipt("delivered", run.pk)
    assert step(run, "payment").result == PAID


def test_the_transition_itself_refuses_a_late_event_whoever_chose_the_run(script):
    """The rule lives in the transition, under the run's lock: a path that picked the run
    before its deadline passed (or any other caller) delivers nothing after it."""
    run = _waiting_past_its_deadline("test-payment-fail")
    records = AuditRecord.objects.filter(run=run).count()
    with pytest.raises(TransitionNotAllowed, match="its timeout decides"):
        transitions.deliver_event(run.pk, step_name="payment", source="psp", event_id="late",
                                  payload=PAID, actor=Actor.system("psp"))
    assert step(run, "payment").status == StepStatus.WAITING
    assert not ExternalEvent.objects.exists()
    assert AuditRecord.objects.filter(run=run).count() == records
