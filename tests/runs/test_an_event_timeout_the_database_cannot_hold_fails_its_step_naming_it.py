"""An event wait's timeout that puts its deadline past the year 9999 cannot be computed, let
alone stored: the run's advance raised, the run stayed queued, and every worker failed on it
in turn. As for a sleep's wake time, the step fails at once as a permanent error of the
workflow's code, naming the timeout, and the run waits for a person, readable; a far but
sensible timeout still waits."""

from datetime import timedelta

import pytest

from runs.definitions.definition import Workflow, registry
from runs.execution import executor
from runs.models import AttentionReason, ErrorClass, Run, RunStatus, StepStatus
from tests.factories import new_run, step
from tests.workflows import OrderIn

pytestmark = pytest.mark.django_db


@pytest.fixture
def times_out_after():
    """Declare "test-timed-wait", whose one step waits for "e" for the timeout given."""
    declared = []

    def declare(timeout: timedelta) -> None:
        flow = Workflow("test-timed-wait", version=1, input=OrderIn)
        flow.wait_for_event("wait", event="e", timeout=timeout)
        declared.append(flow)

    yield declare
    for flow in declared:
        registry.unregister(flow)


def test_the_step_fails_naming_its_timeout_and_the_run_stays_readable(script,
                                                                      times_out_after):
    times_out_after(timedelta(days=999_999_999))
    run = new_run("test-timed-wait")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    run = Run.objects.get(pk=run.pk)
    assert run.attention_reason == AttentionReason.PERMANENT_ERROR
    named = "its event timeout now"
    assert named in run.status_message and "is past the year 9999" in run.status_message
    assert run.status_message.count("wait:") == 1  # the step named once
    assert run.next_wake_at is None
    wait = step(run, "wait")
    assert (wait.status, wait.error_class) == (StepStatus.FAILED, ErrorClass.PERMANENT)
    assert named in wait.error_message and wait.next_attempt_at is None


def test_a_far_but_sensible_timeout_still_waits(script, times_out_after):
    times_out_after(timedelta(days=365 * 5000))
    run = new_run("test-timed-wait")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    run = Run.objects.get(pk=run.pk)
    assert run.next_wake_at == step(run, "wait").next_attempt_at
    assert run.next_wake_at.year > 6000
