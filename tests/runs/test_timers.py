"""Durable timers: a run sleeps until its time holding no process, the sweeper wakes it
when due (not before), the console says "sleeping until", and a person may wake it early
with a reason."""

from datetime import timedelta

import pytest
from django.utils import timezone

from audit.actions import AuditAction
from audit.chain import Actor
from audit.models import AuditRecord
from runs.definitions.definition import Workflow, registry
from runs.execution import executor, sweeper
from runs.machine import transitions
from runs.machine.errors import ReasonRequired, TransientError, TransitionNotAllowed
from runs.models import RunStatus, StepStatus
from runs.operator.actions import ACTIONS, ActionInput
from tests.factories import new_run, step
from tests.workflows import OrderIn

pytestmark = pytest.mark.django_db
OLGA = Actor(kind="user", label="olga")


def test_a_run_sleeps_without_a_worker_and_the_sweeper_wakes_it_when_due(script):
    run = new_run("test-sleepy")
    started = timezone.now()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    run.refresh_from_db()
    timer = step(run, "cool-off")
    assert timer.status == StepStatus.WAITING
    assert run.lease_owner == "" and run.next_wake_at == timer.next_attempt_at
    assert started + timedelta(minutes=59) < timer.next_attempt_at < \
        timezone.now() + timedelta(hours=1, seconds=1)
    assert run.status_message.startswith("cool-off: sleeping until ")
    assert [c[0] for c in script.calls] == ["look"]
    # Before its time: nothing is due, a stray wake-up changes nothing.
    assert sweeper.sweep(now=timezone.now() + timedelta(minutes=30)).due == 0
    assert executor.advance_run(run.pk, worker="w2") is None
    # At its time the sweeper finds it, and a claim then carries the run on.
    later = timer.next_attempt_at + timedelta(seconds=1)
    assert sweeper.sweep(now=later).due == 1
    lease = transitions.claim_run(run.pk, worker="w2", now=later)
    assert lease.work.name == "look-again"
    assert step(run, "cool-off").status == StepStatus.SUCCEEDED
    assert AuditRecord.objects.filter(run=run, action=AuditAction.TIMER_FIRED).count() == 1


def test_the_run_page_says_sleeping_until(admin_client, script):
    run = new_run("test-sleepy")
    executor.advance_run(run.pk, worker="w1")
    page = admin_client.get(f"/runs/{run.pk}/").content.decode()
    assert "sleeping until" in page and "Wake now" in page


def test_a_person_wakes_it_early_with_a_reason(script):
    run = new_run("test-sleepy")
    executor.advance_run(run.pk, worker="w1")
    with pytest.raises(ReasonRequired):
        transitions.wake_timer(run.pk, actor=OLGA, reason=" ")
    ACTIONS["wake_timer"].perform(run.pk, actor=OLGA,
                                  given=ActionInput(reason="customer called, go now"))
    run.refresh_from_db()
    assert run.status == RunStatus.QUEUED
    woken = AuditRecord.objects.get(run=run, action=AuditAction.TIMER_WOKEN)
    assert (woken.actor_label, woken.reason) == ("olga", "customer called, go now")
    assert executor.advance_run(run.pk, worker="w2") == RunStatus.COMPLETED
    assert [c[0] for c in script.calls] == ["look", "look-again"]
    # Nothing to wake any more.
    with pytest.raises(TransitionNotAllowed):
        transitions.wake_timer(run.pk, actor=OLGA, reason="again")


def test_wake_is_refused_for_a_run_that_does_not_sleep(script):
    run = new_run()
    script.plan["fetch"] = [TransientError("503")]
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING  # a retry, no timer
    with pytest.raises(TransitionNotAllowed, match="not sleeping on a timer"):
        transitions.wake_timer(run.pk, actor=OLGA, reason="x")


def test_sleep_until_a_time_from_the_input_and_a_time_past_goes_on_at_once(script):
    past = Workflow("test-sleep-until", version=1, input=OrderIn)
    try:
        past.sleep("until-due", until=lambda data: timezone.now() - timedelta(minutes=1))
        run = new_run("test-sleep-until")
        assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
        assert step(run, "until-due").status == StepStatus.SUCCEEDED
    finally:
        registry.unregister(past)
    with pytest.raises(ValueError, match="either duration or until"):
        past.sleep("both", duration=timedelta(1), until=lambda data: None)
    with pytest.raises(ValueError, match="step 'never': duration must be a positive timedelta"):
        past.sleep("never", duration=timedelta(0))
    # Seconds given as a number, or a wait's timeout so, are refused naming step and option.
    with pytest.raises(ValueError, match="step 'five': duration must be a positive timedelta, "
                                         "not 5"):
        past.sleep("five", duration=5)
    with pytest.raises(ValueError, match="step 'paid': timeout must be a positive timedelta"):
        past.wait_for_event("paid", event="payment.settled", timeout=3600)
