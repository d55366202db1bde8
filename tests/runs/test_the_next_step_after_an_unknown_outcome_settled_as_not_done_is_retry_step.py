"""Once a person settles an unknown outcome as not done (Reconcile, "not found", with
evidence), the run's next step is Retry step of that step, as the runbook's settled_not_done
section and the run's own message say, never another lookup of a step that is no longer
unknown; the retry sends it again with the same key."""

import pytest

from audit.chain import Actor
from runs.definitions.definition import NotFound
from runs.execution import executor
from runs.machine import transitions
from runs.machine.errors import UnknownOutcome
from runs.models import AttentionReason, Run, RunStatus, Step, StepStatus
from runs.operator.actions import ActionInput
from runs.operator.guidance import recommend
from tests.factories import new_run, step

pytestmark = pytest.mark.django_db
OLGA = Actor(kind="user", label="olga")


def _steps(run: Run) -> list[Step]:
    return list(Step.objects.filter(run=run).order_by("position"))


def test_after_not_found_the_next_step_is_retry_step_with_the_same_key(script):
    # A high-impact write whose lookup finds nothing: not resent without a person.
    script.plan["post-ledger"] = [UnknownOutcome("timed out after sending")]
    run = new_run()
    executor.advance_run(run.pk, worker="w1")
    run = Run.objects.get(pk=run.pk)
    assert step(run, "post-ledger").status == StepStatus.UNKNOWN
    assert recommend(run, _steps(run)).action.name == "reconcile"

    transitions.reconcile(run.pk, step_name="post-ledger", verdict=NotFound(), actor=OLGA,
                          reason="checked the ledger", evidence="no entry under the key")
    run = Run.objects.get(pk=run.pk)
    assert run.attention_reason == AttentionReason.SETTLED_NOT_DONE
    assert "retry the step" in run.status_message
    advice = recommend(run, _steps(run))
    assert (advice.action.name, advice.step) == ("retry_step", "post-ledger")
    assert "not possible now" not in advice.why

    key = step(run, "post-ledger").idempotency_key
    advice.action.perform(run.pk, actor=OLGA,
                          given=ActionInput(reason="not found: send it", step=advice.step))
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    sent = [k for name, k, _ in script.calls if name == "post-ledger"]
    assert sent == [key, key]
