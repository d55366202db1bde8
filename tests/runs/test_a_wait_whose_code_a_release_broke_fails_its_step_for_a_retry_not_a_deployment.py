"""A release changed a sleep's `until` or an event wait's `correlate` under running runs
(no new version), and for an older run it raises or gives what the wait cannot use: a key
its input lacks, a naive datetime (its start checked the code of then). The step fails when
the run reaches it as a step whose code raised unexpectedly does (unclassified_error), naming
the step and what went wrong, and the next step the run's page advises is a retry once the
code is fixed, which the run accepts; nothing says a deployment is missing, as the reason
"definition missing" said before ("This worker's code has no ... deploy the code that has
them"). The step before keeps its success (recorded once, its code called once); no error
reaches the worker; the run is not claimed again and again. Retried once the code is fixed,
it sleeps or waits as declared and goes on."""

from datetime import datetime, timedelta, tzinfo

import pytest
from django.utils import timezone

from audit.actions import AuditAction
from audit.chain import Actor
from audit.models import AuditRecord
from runs.definitions.definition import registry
from runs.execution import executor
from runs.machine import transitions
from runs.models import AttentionReason, ErrorClass, ExternalEvent, RunStatus, Step, StepStatus
from runs.operator.guidance import recommend
from runs.waiting import events
from tests.factories import new_run, step

pytestmark = pytest.mark.django_db
OLGA = Actor(kind="user", label="olga")


def _key_older_runs_lack(data):
    return data["deadline"]


def _naive(data):
    return datetime(2030, 1, 1)


class _NoOffset(tzinfo):
    """A time zone that gives no UTC offset: a time in it is as naive as one without."""

    def utcoffset(self, dt):
        return None


def _in_a_zone_without_offset(data):
    return datetime(2030, 1, 1, tzinfo=_NoOffset())


def _calls(script) -> list[str]:
    return [name for name, *_ in script.calls]


def _records(run, action) -> list[AuditRecord]:
    return list(AuditRecord.objects.filter(run=run, action=action).order_by("seq"))


def _failed_by_its_code(run, step_name: str, error: str) -> None:
    """The step failed as code that raised unexpectedly, the run waits for a person, named
    and audited, holding no lease or timer, and its next step is a retry, not a deploy."""
    run.refresh_from_db()
    assert (run.status, run.attention_reason) == (RunStatus.ATTENTION,
                                                  AttentionReason.UNCLASSIFIED_ERROR)
    assert run.status_message.startswith(f"{step_name}: its ")
    assert error in run.status_message
    assert run.current_step == step_name
    assert (run.lease_owner, run.lease_expires_at, run.next_wake_at) == ("", None, None)
    failed = step(run, step_name)
    assert (failed.status, failed.error_class) == (StepStatus.FAILED, ErrorClass.UNCLASSIFIED)
    assert error in failed.error_message and failed.next_attempt_at is None
    held = _records(run, AuditAction.ATTENTION)[-1]
    assert held.step_name == step_name and error in held.data["error"]
    assert (held.before["status"], held.after["status"]) == (RunStatus.RUNNING,
                                                              RunStatus.ATTENTION)
    assert _records(run, AuditAction.DEFINITION_MISSING) == []
    advice = recommend(run, list(Step.objects.filter(run=run).order_by("position")))
    assert advice.reason_label == "unexpected error"
    assert (advice.action_name, advice.step) == ("retry_step", step_name)
    assert "not possible now" not in advice.why
    assert "Release code that takes it, then retry the step" in advice.why
    assert "deploy" not in advice.why.lower() and "has no" not in advice.why


@pytest.mark.parametrize(("until", "error"), [
    (_key_older_runs_lack, "its until(input) raised KeyError: 'deadline'"),
    (_naive, "its until(input) returned a datetime without a time zone (2030-01-01T00:00:00)"),
    (_in_a_zone_without_offset,
     "its until(input) returned a datetime without a time zone (2030-01-01T00:00:00)"),
])
def test_a_sleep_whose_until_fails_fails_its_step_and_keeps_the_step_before(
        script, monkeypatch, until, error):
    run = new_run("test-sleepy")
    sleep = registry.get("test-sleepy", 1).step("cool-off")
    monkeypatch.setattr(sleep, "sleep_for", None)  # the release, after the start
    monkeypatch.setattr(sleep, "sleep_until", until)

    # Reached from the checkpoint that records "look": no error reaches the worker.
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    _failed_by_its_code(run, "cool-off", error)
    assert step(run, "look").status == StepStatus.SUCCEEDED
    assert _calls(script) == ["look"]
    assert len(_records(run, AuditAction.SUCCEEDED)) == 1
    assert len(_records(run, AuditAction.ATTENTION)) == 1
    assert _records(run, AuditAction.TIMER_STARTED) == []
    assert _records(run, AuditAction.TIMER_FIRED) == []
    # Not claimed again while it waits for a person.
    assert executor.advance_run(run.pk, worker="w2") is None

    # Retried before the code is fixed: fails again at the claim, nothing called again.
    transitions.retry_step(run.pk, step_name="cool-off", actor=OLGA, reason="try once more")
    assert executor.advance_run(run.pk, worker="w2") == RunStatus.ATTENTION
    _failed_by_its_code(run, "cool-off", error)
    assert _calls(script) == ["look"]
    assert len(_records(run, AuditAction.ATTENTION)) == 2

    # The code fixed (the release rolled back), retried as advised: it sleeps as declared.
    monkeypatch.undo()
    transitions.retry_step(run.pk, step_name="cool-off", actor=OLGA, reason="until() fixed")
    assert executor.advance_run(run.pk, worker="w3") == RunStatus.WAITING
    run.refresh_from_db()
    timer = step(run, "cool-off")
    assert timer.status == StepStatus.WAITING
    assert timer.next_attempt_at > timezone.now() + timedelta(minutes=59)
    assert run.next_wake_at == timer.next_attempt_at and run.attention_reason == ""
    assert len(_records(run, AuditAction.TIMER_STARTED)) == 1
    assert _calls(script) == ["look"]

    # And goes on when woken; the step before is never sent again.
    transitions.wake_timer(run.pk, actor=OLGA, reason="customer called")
    assert executor.advance_run(run.pk, worker="w3") == RunStatus.COMPLETED
    assert _calls(script) == ["look", "look-again"]
    assert len(_records(run, AuditAction.TIMER_FIRED)) == 1


@pytest.mark.parametrize(("correlate", "error"), [
    (lambda data: data["invoice_id"], "its correlate(input) raised KeyError: 'invoice_id'"),
    (lambda data: data.get("invoice_id"),
     "its correlate(input) returned None, not the correlation key as text"),
    (lambda data: data["amount"],
     "its correlate(input) returned an int (100), not the correlation key as text"),
    (lambda data: "", "its correlate(input) returned a key no event can carry: it is empty"),
])
def test_an_event_wait_whose_correlate_fails_fails_its_step_and_keeps_the_step_before(
        script, monkeypatch, correlate, error):
    run = new_run("test-payment-wait")
    monkeypatch.setattr(registry.get("test-payment-wait", 1).step("payment"), "correlate",
                        correlate)

    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    _failed_by_its_code(run, "payment", error)
    assert step(run, "invoice").status == StepStatus.SUCCEEDED
    payment = step(run, "payment")
    assert (payment.remote_ref, payment.next_attempt_at) == ("", None)
    assert _calls(script) == ["invoice"]
    assert len(_records(run, AuditAction.SUCCEEDED)) == 1
    assert _records(run, AuditAction.EVENT_AWAITED) == []
    assert executor.advance_run(run.pk, worker="w2") is None

    monkeypatch.undo()
    transitions.retry_step(run.pk, step_name="payment", actor=OLGA,
                           reason="correlate() fixed")
    assert executor.advance_run(run.pk, worker="w2") == RunStatus.WAITING
    run.refresh_from_db()
    payment = step(run, "payment")
    assert payment.status == StepStatus.WAITING
    assert payment.remote_ref == f"awaiting-event:payment.settled:{run.business_key}"
    assert len(_records(run, AuditAction.EVENT_AWAITED)) == 1
    assert _calls(script) == ["invoice"]

    # The event finds it by its key, and the run goes on.
    receipt = events.receive_event(
        workflow="test-payment-wait", event="payment.settled", key=run.business_key,
        event_id="evt-1", source="psp", payload={"amount": 5, "reference": "PSP-1"},
        actor=Actor.system("payments"))
    assert receipt == events.Receipt("delivered", run.pk)
    assert executor.advance_run(run.pk, worker="w2") == RunStatus.COMPLETED
    assert _calls(script) == ["invoice", "book"]
    assert ExternalEvent.objects.filter(consumed_run_id=run.pk).count() == 1


def test_what_the_code_raised_is_kept_without_the_credentials_in_it(script, monkeypatch):
    def correlate(data):
        raise ValueError("lookup refused: Authorization: Bearer abc.def.ghi api_key=sk-12345678")

    run = new_run("test-payment-wait")
    monkeypatch.setattr(registry.get("test-payment-wait", 1).step("payment"), "correlate",
                        correlate)
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    run.refresh_from_db()
    held = _records(run, AuditAction.ATTENTION)[0]
    for text in (run.status_message, held.data["error"], step(run, "payment").error_message):
        assert "ValueError: lookup refused" in text and "[redacted]" in text
        assert "abc.def.ghi" not in text and "sk-12345678" not in text
