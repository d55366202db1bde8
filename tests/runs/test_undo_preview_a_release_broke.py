"""A compensation paused before a high-impact undo for a person to confirm; a release
changed the step's compensation preview (no new version) and it raises on this older run
(it reads a result key the run lacks). The confirmation dialog says the preview is not
available and why (the error, without credentials); the person can still confirm, the undo
is then sent once with its compensation key, and the older undos follow."""

import pytest

from audit.actions import AuditAction
from audit.chain import Actor
from audit.models import AuditRecord
from runs.definitions.definition import registry
from runs.execution import executor
from runs.machine import transitions
from runs.models import AttentionReason, RunStatus, StepStatus
from runs.operator.actions import ACTIONS, ActionInput
from tests.factories import SYSTEM, new_run, place, step

pytestmark = pytest.mark.django_db
OLGA = Actor(kind="user", label="olga")
SECOND = Actor(kind="user", label="sam")
DONE = {"fetch": StepStatus.SUCCEEDED, "classify": StepStatus.SUCCEEDED,
        "create-task": StepStatus.SUCCEEDED, "post-ledger": StepStatus.SUCCEEDED}


def _reads_a_key_older_runs_lack(ctx):
    return {"reverses": ctx.results["post-ledger"]["entry_id"]}  # None here: TypeError


def _names_a_credential(ctx):
    raise KeyError("entry_id missing; ledger said token=s3cr3t-value")


def _undos(script) -> list[tuple]:
    return [call for call in script.calls if call[0].endswith(":compensate")]


@pytest.fixture
def paused(script):
    """All four steps done; a compensation paused before the undo of post-ledger."""
    run = place(new_run(), status=RunStatus.ATTENTION, step_statuses=DONE)
    transitions.compensate(run.pk, actor=SYSTEM, reason="invoice withdrawn",
                           approved_by=SECOND)
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    run.refresh_from_db()
    assert run.attention_reason == AttentionReason.COMPENSATION_PAUSED
    assert _undos(script) == []
    return run


@pytest.mark.parametrize(("preview", "said"), [
    (_reads_a_key_older_runs_lack,
     "not available: the preview raised TypeError: 'NoneType' object is not subscriptable"),
    (_names_a_credential,
     "not available: the preview raised KeyError: 'entry_id missing; ledger said "
     "token=[redacted]'"),
])
def test_an_undo_whose_preview_raises_can_still_be_seen_and_confirmed(
        script, paused, monkeypatch, preview, said):
    monkeypatch.setattr(registry.get("test-orders", 1).step("post-ledger"),
                        "compensation_preview_fn", preview)
    action = ACTIONS["confirm_compensation"]
    steps = list(paused.steps.order_by("position"))

    # The dialog explains, saying why the preview is missing; the action is still offered.
    lines = action.explain(paused, steps)
    assert lines[1:] == ["The undo of post-ledger will send:", f"preview: {said}"]
    assert "s3cr3t" not in " ".join(lines)
    assert action.refusal(paused, steps) is None
    assert _undos(script) == []  # explaining sends nothing

    run = action.perform(paused.pk, actor=OLGA,
                         given=ActionInput(reason="checked the ledger", step="post-ledger"))
    assert run.status == RunStatus.COMPENSATING
    confirmed = AuditRecord.objects.get(run=run, action=AuditAction.COMPENSATION_CONFIRMED)
    assert confirmed.step_name == "post-ledger"
    assert confirmed.data["will_send"] == {"preview": said}

    # The confirmed undo is sent once, with its key; then the older low-impact undo.
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPENSATED
    ledger, task = step(run, "post-ledger"), step(run, "create-task")
    assert _undos(script) == [("post-ledger:compensate", ledger.compensation_key, 1),
                              ("create-task:compensate", task.compensation_key, 1)]
    assert (ledger.status, task.status) == (StepStatus.COMPENSATED, StepStatus.COMPENSATED)
    assert list(script.compensations) == [ledger.compensation_key, task.compensation_key]
