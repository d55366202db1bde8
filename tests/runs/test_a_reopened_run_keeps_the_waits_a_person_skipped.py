"""Reopen brings back the steps the run's ending skipped (those it never reached), not a wait
a person had skipped before: that skip was a decision on its own, recorded with its reason,
and the reopened run does not wait for that event again."""

import pytest

from audit.chain import Actor
from runs.execution import executor
from runs.machine.errors import PermanentError
from runs.models import AttentionReason, Run, RunStatus, StepStatus
from runs.operator.actions import ACTIONS, ActionInput
from tests.factories import new_run, step

pytestmark = pytest.mark.django_db
OLGA = Actor(kind="user", label="olga")


def act(action: str, run, **given) -> None:
    ACTIONS[action].perform(run.pk, actor=OLGA, given=ActionInput(reason="probe", **given))


def test_the_skipped_event_wait_stays_skipped_and_the_run_goes_on_past_it(script):
    script.plan["book"] = [PermanentError("400 the ledger refused the booking")]
    run = new_run("test-payment-wait")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    act("skip_event", run)
    executor.advance_run(run.pk, worker="w1")
    run.refresh_from_db()
    assert run.status == RunStatus.ATTENTION
    assert run.attention_reason == AttentionReason.PERMANENT_ERROR

    act("terminate", run)
    act("reopen", run)

    assert step(run, "payment").status == StepStatus.SKIPPED
    act("retry_step", run, step="book")
    executor.advance_run(run.pk, worker="w1")
    run = Run.objects.get(pk=run.pk)
    assert run.status == RunStatus.COMPLETED, run.status_message
    assert step(run, "payment").status == StepStatus.SKIPPED
    assert [name for name, *_ in script.calls].count("book") == 2


def test_the_steps_the_ending_skipped_come_back(script):
    run = new_run("test-payment-wait")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    act("terminate", run)
    assert step(run, "book").status == StepStatus.SKIPPED
    act("reopen", run)
    assert step(run, "book").status == StepStatus.PENDING
    # The event wait the run held when it ended is held still (runs.waiting.kept).
    assert step(run, "payment").status == StepStatus.WAITING
