"""The setup shared by the tests of a person's answer to an event wait (Deliver event, Skip
event) settling the events kept for it: a payment provider that sends test-payment-wait's
event, the runs that wait for it, and a re-run that reaches the wait again."""

from audit.chain import Actor
from runs.definitions.definition import registry
from runs.execution import executor, sweeper
from runs.machine import transitions
from runs.models import AttentionReason, ExternalEvent, Run, RunStatus, StepStatus
from runs.operator.actions import ACTIONS, ActionInput
from runs.waiting import events
from runs.waiting.kept import consume_kept_for_run
from tests.factories import new_run, step

PSP = Actor.system("payments")
OLGA = Actor(kind="user", label="olga")
PAID = {"amount": 5, "reference": "PSP-9"}


def send(run, event, *, key=None, event_id="evt-1"):
    """The provider sends `event` for the run's key (or `key`)."""
    return events.receive_event(workflow=run.workflow_name, event=event,
                                key=key or run.business_key, event_id=event_id, source="psp",
                                payload=PAID, actor=PSP)


def kept_before_the_wait() -> tuple[Run, Run]:
    """Two runs of test-payment-wait, and an event kept for each before either waited; the
    first then waits, and the worker's look for its kept event after the wait was lost."""
    run = new_run("test-payment-wait")
    other = new_run("test-payment-wait")
    assert send(run, "payment.settled") == events.Receipt("kept")
    assert send(run, "payment.settled", key=other.business_key,
                event_id="evt-other") == events.Receipt("kept")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    return run, other


def kept_under_a_renamed_name(monkeypatch) -> Run:
    """A run of test-payment-wait waits; a release renames the event under it, and the
    provider sends the new name: the event is kept, and the run waits for a person."""
    run = new_run("test-payment-wait")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    monkeypatch.setattr(registry.get("test-payment-wait", 1).step("payment"), "event_name",
                        "payment.confirmed")
    assert send(run, "payment.confirmed") == events.Receipt("kept")
    run.refresh_from_db()
    assert run.attention_reason == AttentionReason.DEFINITION_MISSING
    return run


def answered_by_hand_then_rerun(run, action: str, given: ActionInput, *,
                                rerun_reason: str) -> Run:
    """Olga answers the wait (the operator action `action`, with `given`); the run
    completes; a re-run from the wait reaches it again, and the worker's look for a kept
    event and the sweeper's pass both come by."""
    ACTIONS[action].perform(run.pk, actor=OLGA, given=given)
    assert executor.advance_run(run.pk, worker="w2") == RunStatus.COMPLETED
    transitions.rerun_from_step(run.pk, step_name="payment", actor=OLGA, reason=rerun_reason)
    assert executor.advance_run(run.pk, worker="w2") == RunStatus.WAITING
    assert not consume_kept_for_run(run.pk)
    assert sweeper.sweep().events == 0
    return Run.objects.get(pk=run.pk)


def assert_waits_again(run, ref: str) -> None:
    """The re-run waits at "payment" (for `ref`), with no result."""
    payment = step(run, "payment")
    assert (payment.status, payment.remote_ref, payment.result) == (StepStatus.WAITING, ref,
                                                                    None)
    assert run.status == RunStatus.WAITING


def assert_still_kept_for(other: Run) -> None:
    """The event kept for the other run's key is not consumed, and reaches that run when it
    waits."""
    assert ExternalEvent.objects.get(event_id="evt-other").consumed_at is None
    assert executor.advance_run(other.pk, worker="w1") == RunStatus.WAITING
    assert consume_kept_for_run(other.pk)
