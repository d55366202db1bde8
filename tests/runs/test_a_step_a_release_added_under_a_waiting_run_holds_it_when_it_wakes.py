"""A release added a step to a workflow without a new version while a run of it slept or
waited for an event (for weeks). The run had no row for the new step, so when it woke it
passed the step by and completed without its work, in silence. It is now held for a person
when it wakes (definition_missing, naming the step), as for a step a release renamed or
removed: nothing after the wait is called; once the code it was started with is back,
**Resume** finishes it."""

import pytest

from audit.actions import AuditAction
from audit.chain import Actor
from audit.models import AuditRecord
from runs.definitions.definition import registry
from runs.execution import executor
from runs.machine import transitions
from runs.models import AttentionReason, RunStatus, Step, StepStatus
from runs.waiting import events
from tests.factories import new_run

pytestmark = pytest.mark.django_db
OLGA = Actor(kind="user", label="olga")
PSP = Actor.system("psp")


def _calls(script) -> list[str]:
    return [name for name, *_ in script.calls]


def _release_adds_a_step(monkeypatch, script, workflow: str, *, at: int) -> None:
    definition = registry.get(workflow, 1)
    monkeypatch.setattr(definition, "steps", list(definition.steps))

    @definition.read("audit-trail-export")
    def audit_trail_export(ctx):
        script.calls.append(("audit-trail-export",))
        return {"exported": True}

    # Declared last; moved to `at`, where the release put it.
    definition.steps.insert(at, definition.steps.pop())


def _held_for_the_added_step(run, script, calls_before: list[str]) -> None:
    run.refresh_from_db()
    assert (run.status, run.attention_reason) == (RunStatus.ATTENTION,
                                                  AttentionReason.DEFINITION_MISSING)
    assert "'audit-trail-export'" in run.status_message
    assert "started without" in run.status_message
    assert _calls(script) == calls_before
    assert not Step.objects.filter(run=run, name="audit-trail-export").exists()
    assert not AuditRecord.objects.filter(run=run, action=AuditAction.COMPLETED).exists()
    assert AuditRecord.objects.filter(run=run, action=AuditAction.DEFINITION_MISSING).count() == 1


@pytest.mark.parametrize("at", [3, 2, 0], ids=["after-the-last", "after-the-sleep", "first"])
def test_a_sleeping_run_is_held_when_it_wakes_under_a_step_a_release_added(
        script, monkeypatch, at):
    run = new_run("test-sleepy")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING

    _release_adds_a_step(monkeypatch, script, "test-sleepy", at=at)
    transitions.wake_timer(run.pk, actor=OLGA, reason="three weeks later")
    assert executor.advance_run(run.pk, worker="w2") == RunStatus.ATTENTION
    _held_for_the_added_step(run, script, ["look"])
    assert executor.advance_run(run.pk, worker="w3") is None

    # The release rolled back: resumed, it goes on as it was started.
    monkeypatch.undo()
    transitions.resume(run.pk, actor=OLGA, reason="release rolled back")
    assert executor.advance_run(run.pk, worker="w3") == RunStatus.COMPLETED
    assert _calls(script) == ["look", "look-again"]
    assert Step.objects.get(run=run, name="look-again").status == StepStatus.SUCCEEDED


def test_a_run_waiting_for_an_event_is_held_when_the_event_comes_under_a_step_a_release_added(
        script, monkeypatch):
    run = new_run("test-payment-wait")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING

    _release_adds_a_step(monkeypatch, script, "test-payment-wait", at=3)
    events.receive_event(workflow=run.workflow_name, event="payment.settled",
                         key=run.business_key, event_id="evt-1", source="psp",
                         payload={"amount": 5, "reference": "PSP-9"}, actor=PSP)
    executor.advance_run(run.pk, worker="w2")
    _held_for_the_added_step(run, script, ["invoice"])
