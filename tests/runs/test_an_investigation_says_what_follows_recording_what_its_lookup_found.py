"""The investigation card, having looked an unknown step up by key, says what recording
that answer does, as the reconcile transition does it: found, the run continues; not
found, the step is failed and waits for Retry step (the run does not continue); on a run a
person ended, nothing sends it on, and it is terminated once every effect is settled."""

import pytest

from audit.chain import Actor
from runs.machine import transitions
from runs.machine.errors import TransientError, UnknownOutcome
from runs.models import AttentionReason, Run, RunStatus, Step, StepStatus
from runs.operator.actions import ACTIONS, ActionInput
from runs.operator.investigation import investigate
from tests.agent_runs import advance
from tests.factories import new_run

pytestmark = pytest.mark.django_db
PERSON = Actor.system("test")


def _task_unknown(script) -> Run:
    """create-task timed out after sending and every automatic lookup failed."""
    script.plan["create-task"] = [UnknownOutcome("timeout after send")]
    script.lookup_errors.extend([TransientError("tracker lookup down")] * 3)
    run = advance(new_run(wake=False))
    assert run.attention_reason == AttentionReason.UNKNOWN_OUTCOME
    return run


def _reconcile(run):
    ACTIONS["reconcile"].perform(run.pk, actor=PERSON,
                                 given=ActionInput(reason="tracker back", step="create-task"))
    return Run.objects.get(pk=run.pk)


def test_found_nothing_the_card_says_a_retry_follows_and_the_run_does_not_continue(script):
    run = _task_unknown(script)
    card = investigate(run, lookups=True)
    assert card.next_step.startswith("Reconcile: create-task")
    assert "the run continues" not in card.next_step
    assert "Retry step" in card.next_step

    run = _reconcile(run)
    # As the card said: the step failed, the run waits for a person, nothing was sent.
    assert run.status == RunStatus.ATTENTION
    assert Step.objects.get(run=run, name="create-task").status == StepStatus.FAILED
    assert not script.effects
    ACTIONS["retry_step"].perform(run.pk, actor=PERSON,
                                  given=ActionInput(reason="send it", step="create-task"))
    run = advance(run)
    assert run.status == RunStatus.COMPLETED
    assert len([r for r in script.effects.values() if r.startswith("create-task")]) == 1


def test_found_it_the_card_says_the_run_continues(script):
    run = _task_unknown(script)
    key = Step.objects.get(run=run, name="create-task").idempotency_key
    script.effects[key] = "task-77"
    card = investigate(run, lookups=True)
    assert "task-77" in card.next_step and "the run continues" in card.next_step

    run = advance(_reconcile(run))
    assert run.status == RunStatus.COMPLETED
    assert list(script.effects.values()).count("task-77") == 1


def test_on_a_run_a_person_ended_the_card_says_settling_terminates_it(script):
    run = _task_unknown(script)
    transitions.terminate(run.pk, actor=PERSON, reason="order withdrawn")
    run = Run.objects.get(pk=run.pk)
    assert run.attention_reason == AttentionReason.ENDED_UNSETTLED
    card = investigate(run, lookups=True)
    assert "the run continues" not in card.next_step
    assert "terminated" in card.next_step

    run = _reconcile(run)
    assert run.status == RunStatus.TERMINATED
    assert not script.effects
    assert Step.objects.get(run=run, name="post-ledger").attempt == 0
