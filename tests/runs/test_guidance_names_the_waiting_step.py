"""For every attention reason, the recommended action names a step its transition accepts
and is offered whenever the transition accepts it: never a step the run does not wait at
("not possible now" beside an action that works on another step)."""

import pytest

from runs.models import AttentionReason, RunStatus, Step
from runs.operator.actions import ACTIONS
from runs.operator.guidance import recommend
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db

# test-orders: fetch, classify, create-task (write, low), post-ledger (write, high).
SHAPES = {
    "one failed step": {"fetch": "succeeded", "classify": "succeeded",
                        "create-task": "failed"},
    "an unknown step": {"fetch": "succeeded", "classify": "succeeded",
                        "create-task": "unknown"},
    "an undo waiting behind a failed step": {
        "fetch": "succeeded", "classify": "succeeded", "create-task": "succeeded",
        "post-ledger": "failed"},
    "a failed undo": {"fetch": "succeeded", "classify": "succeeded",
                      "create-task": "compensation_failed", "post-ledger": "compensated"},
    "nothing failed": {"fetch": "succeeded"},
}


@pytest.mark.parametrize("reason", [r.value for r in AttentionReason])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_the_recommended_action_names_a_step_its_transition_accepts(reason, shape):
    run = new_run()
    status = (RunStatus.COMPENSATION_FAILED if reason == AttentionReason.COMPENSATION_FAILED
              else RunStatus.ATTENTION)
    run = place(run, status=status, step_statuses=SHAPES[shape], attention_reason=reason,
                status_message="placed")
    steps = list(Step.objects.filter(run=run).order_by("position"))
    advice = recommend(run, steps)
    assert advice is not None
    if advice.action is None:
        # Refused: then the transition accepts the action meant on no step at all.
        meant = ACTIONS[advice.meant]
        assert "not possible now" in advice.why
        if meant.takes_step:
            assert all(meant.refusal(run, steps, step=s) is not None for s in steps)
        else:
            assert meant.refusal(run, steps) is not None
        return
    if advice.action.takes_step:
        accepted = [s.name for s in advice.action.eligible_steps(run, steps)]
        assert advice.step in accepted, (advice.step, accepted)
        target = next(s for s in steps if s.name == advice.step)
        assert advice.action.refusal(run, steps, step=target) is None
        assert advice.step in advice.why
    else:
        assert advice.action.refusal(run, steps) is None

