"""An undo that timed out after sending, every try, may have been undone: the run waits as
compensation failed, but the investigation card does not state as a fact that the undo
failed (an operator who reads that does the refund by hand, a second time). It names the
undo's outcome as unconfirmed and gives no "go"; an undo the remote system refused is
still a fact."""

import pytest

from runs.execution import sweeper
from runs.machine.errors import PermanentError, UnknownOutcome
from runs.models import ErrorClass, Run, RunStatus, Step, StepStatus
from runs.operator.investigation import GO, LIMITED, investigate
from tests.agent_runs import advance
from tests.factories import make_due, new_run

pytestmark = pytest.mark.django_db


def _undo_fails(script, error) -> Run:
    script.plan["book-shipment"] = [PermanentError("400 no carrier")]
    script.plan["charge-card:compensate"] = [error] * 6
    run = new_run("test-saga", wake=False)
    for _ in range(8):
        run = advance(run, 5)
        if run.status == RunStatus.COMPENSATION_FAILED:
            break
        make_due(run)
        sweeper.sweep()
    assert run.status == RunStatus.COMPENSATION_FAILED
    return run


def test_an_undo_that_timed_out_is_unconfirmed_not_failed(script):
    run = _undo_fails(script, UnknownOutcome("timeout after sending the refund"))
    step = Step.objects.get(run=run, name="charge-card")
    assert (step.status, step.error_class) == (StepStatus.COMPENSATION_FAILED,
                                               ErrorClass.UNKNOWN)
    card = investigate(run)
    assert not [f.text for f in card.facts if f.text.startswith("the undo of charge-card")]
    assert any("undo of charge-card" in text and "may have been undone" in text
               for text in card.unconfirmed)
    assert {f.step: f.effect for f in card.steps}["charge-card"] == "unconfirmed"
    assert card.verdict == LIMITED
    assert not script.compensations  # nothing was sent by reading the card


def test_an_undo_the_remote_system_refused_is_a_fact(script):
    run = _undo_fails(script, PermanentError("refund refused: card closed"))
    card = investigate(run)
    assert any(f.text.startswith("the undo of charge-card failed: PermanentError")
               for f in card.facts)
    assert {f.step: f.effect for f in card.steps}["charge-card"] == "exists"
    assert card.verdict == GO


def _risk(card, action: str) -> str:
    return next(r.duplicate_risk for r in card.risks if r.action == action)


def test_compensates_risk_says_the_undo_in_doubt_may_be_sent_a_second_time(script):
    run = _undo_fails(script, UnknownOutcome("timeout after sending the refund"))
    risk = _risk(investigate(run), "compensate")
    assert "the undo of charge-card may have been done already" in risk
    assert "compensation key" in risk and "is sent once" not in risk


def test_compensates_risk_after_a_refused_undo_is_that_each_undo_is_sent_once(script):
    run = _undo_fails(script, PermanentError("refund refused: card closed"))
    assert _risk(investigate(run), "compensate").startswith(
        "none for the original effects: each undo has its own key and is sent once")
