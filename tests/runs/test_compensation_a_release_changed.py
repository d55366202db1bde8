"""A compensation undoes what the run declared undoable when it started (each such step got
its compensation key then), whatever a release changed since without a new version. An
undo the code lost stops the compensation there, as failed, naming the step, with nothing
undone behind it; it is never passed over as if the effect were not there. Once the undo
is back, compensating again goes on with the same key. An undo a release added to a step
that had none is not sent under this run, keyless."""

import pytest

from audit.models import AuditRecord
from runs.definitions.definition import registry
from runs.execution import executor
from runs.machine import transitions
from runs.machine.errors import TransientError
from runs.models import AttentionReason, RunStatus, StepStatus
from tests.factories import SYSTEM, make_due, new_run, place, step

pytestmark = pytest.mark.django_db

HELD = ("create-task: test-orders v1 in this worker declares no undo for this step, whose "
        "effect stands")


@pytest.fixture
def done_run():
    """Three steps done, the last one (create-task) undoable; the run waits for a person."""
    return place(new_run(), status=RunStatus.ATTENTION,
                 step_statuses={"fetch": StepStatus.SUCCEEDED,
                                "classify": StepStatus.SUCCEEDED,
                                "create-task": StepStatus.SUCCEEDED})


@pytest.fixture
def create_task():
    return registry.get("test-orders", 1).step("create-task")


def undos(script) -> list[tuple]:
    return [call for call in script.calls if call[0].endswith(":compensate")]


def test_an_undo_a_release_removed_stops_the_compensation_naming_the_step(
        script, done_run, create_task, monkeypatch):
    transitions.compensate(done_run.pk, actor=SYSTEM, reason="order withdrawn")
    monkeypatch.setattr(create_task, "compensate_fn", None)

    assert executor.advance_run(done_run.pk, worker="w1") == RunStatus.COMPENSATION_FAILED
    done_run.refresh_from_db()
    assert done_run.attention_reason == AttentionReason.DEFINITION_MISSING
    assert done_run.status_message == HELD
    assert undos(script) == [] and script.compensations == {}
    assert step(done_run, "create-task").status == StepStatus.SUCCEEDED
    held = AuditRecord.objects.get(run=done_run, action="definition_missing")
    assert (held.step_name, held.data["error"]) == ("create-task", HELD)

    monkeypatch.undo()
    transitions.compensate(done_run.pk, actor=SYSTEM, reason="undo restored")
    assert executor.advance_run(done_run.pk, worker="w1") == RunStatus.COMPENSATED
    key = step(done_run, "create-task").compensation_key
    assert undos(script) == [("create-task:compensate", key, 1)]
    assert step(done_run, "create-task").status == StepStatus.COMPENSATED


def test_an_undo_in_flight_that_a_release_removed_is_held_then_sent_again_with_its_key(
        script, done_run, create_task, monkeypatch):
    transitions.compensate(done_run.pk, actor=SYSTEM, reason="order withdrawn")
    script.plan["create-task:compensate"] = [TransientError("busy")]
    assert executor.advance_run(done_run.pk, worker="w1") == RunStatus.COMPENSATING
    assert step(done_run, "create-task").status == StepStatus.COMPENSATING
    monkeypatch.setattr(create_task, "compensate_fn", None)
    make_due(done_run)

    assert executor.advance_run(done_run.pk, worker="w1") == RunStatus.COMPENSATION_FAILED
    done_run.refresh_from_db()
    assert done_run.status_message == HELD
    # Nothing is in flight while it waits: the undo sent failed, and cannot be sent again.
    assert step(done_run, "create-task").status == StepStatus.COMPENSATION_FAILED
    assert len(undos(script)) == 1  # the first attempt only

    monkeypatch.undo()
    transitions.compensate(done_run.pk, actor=SYSTEM, reason="undo restored")
    assert executor.advance_run(done_run.pk, worker="w1") == RunStatus.COMPENSATED
    key = step(done_run, "create-task").compensation_key
    assert [call[1] for call in undos(script)] == [key, key]
    assert len(script.compensations) == 1


def test_an_undo_a_release_added_to_a_step_without_one_is_not_sent(
        script, done_run, monkeypatch):
    classify = registry.get("test-orders", 1).step("classify")
    assert classify.compensate_fn is None and step(done_run, "classify").compensation_key == ""
    monkeypatch.setattr(classify, "compensate_fn",
                        registry.get("test-orders", 1).step("create-task").compensate_fn)
    transitions.compensate(done_run.pk, actor=SYSTEM, reason="order withdrawn")

    assert executor.advance_run(done_run.pk, worker="w1") == RunStatus.COMPENSATED
    assert [call[0] for call in undos(script)] == ["create-task:compensate"]
    assert all(call[1] for call in undos(script))  # never a call without a key
    assert step(done_run, "classify").status == StepStatus.SUCCEEDED
