"""A run ended (terminated, cancelled) while an effect's outcome is unknown stays in attention
with its own reason until the effect is settled: reconcile stays allowed, nothing else is
offered, the investigation card never says the run needs nobody, and the terminate dialog
lists the unsettled effects before anyone confirms. Once settled, the run is terminated."""

import pytest

from audit.chain import Actor
from runs.definitions.definition import Found, NotFound
from runs.execution import executor
from runs.machine import transitions
from runs.machine.errors import TransitionNotAllowed, UnknownOutcome
from runs.models import AttentionReason, Run, RunStatus, Step, StepStatus
from runs.operator.actions import ACTIONS, offered
from runs.operator.guidance import recommend
from runs.operator.investigation import investigate
from runs.reads import selectors

pytestmark = pytest.mark.django_db
OPERATOR = Actor.system("olga")
SECOND = Actor.system("sam")


def _steps(run):
    return list(Step.objects.filter(run=run).order_by("position"))


@pytest.fixture
def unknown_payment(script):
    """A test-orders run in attention whose high-impact post-ledger step is unknown."""
    from tests.factories import new_run

    script.plan["post-ledger"] = [UnknownOutcome("timed out after sending")]
    run = new_run()
    executor.advance_run(run.pk, worker="w1")
    run = Run.objects.get(pk=run.pk)
    assert run.status == RunStatus.ATTENTION
    assert Step.objects.get(run=run, name="post-ledger").status == StepStatus.UNKNOWN
    return run


def test_the_terminate_dialog_lists_the_unsettled_effect_before_anyone_confirms(
        unknown_payment):
    lines = ACTIONS["terminate"].explain(unknown_payment, _steps(unknown_payment))
    assert "post-ledger: outcome unknown: may have happened" in lines


@pytest.mark.parametrize("mode", ["found", "not found"])
def test_a_run_terminated_with_an_unknown_payment_stays_in_attention_until_settled(
        unknown_payment, mode):
    run = unknown_payment
    transitions.terminate(run.pk, actor=OPERATOR, reason="vendor fraud", approved_by=SECOND)
    run = Run.objects.get(pk=run.pk)
    assert run.status == RunStatus.ATTENTION
    assert run.attention_reason == AttentionReason.ENDED_UNSETTLED
    assert "post-ledger" in run.status_message and run.finished_at is None
    assert run.pk in [r.pk for r in selectors.attention_page(workflow_ids=None).runs]

    # Only settling it is offered; the run never goes forward again.
    assert {a.name for a in offered(run, _steps(run))} == {"reconcile"}
    for action in ("resume", "retry_step", "compensate", "terminate", "cancel"):
        refused = ACTIONS[action].refusal(run, _steps(run))
        assert refused, action
    with pytest.raises(TransitionNotAllowed, match="unsettled effects"):
        transitions.resume(run.pk, actor=OPERATOR, reason="go on")
    advice = recommend(run, _steps(run))
    assert advice.action.name == "reconcile" and advice.step == "post-ledger"
    card = investigate(run)
    assert card.next_step != "none: the run needs nobody"
    assert "reconcile" in card.next_step.lower()

    verdict = Found("LE-7") if mode == "found" else NotFound()
    transitions.reconcile(run.pk, step_name="post-ledger", verdict=verdict, actor=OPERATOR,
                          reason="checked the ledger", evidence="ledger search by key")
    run = Run.objects.get(pk=run.pk)
    assert run.status == RunStatus.TERMINATED and run.finished_at is not None
    assert investigate(run).next_step == "none: the run needs nobody"
    # Settling sent nothing and scheduled nothing.
    assert not Step.objects.filter(run=run, status__in=["running", "pending"]).exists()


def test_a_cancel_with_an_unknown_payment_also_stays_until_settled(unknown_payment):
    transitions.cancel(unknown_payment.pk, actor=OPERATOR, reason="not needed",
                       approved_by=SECOND)
    run = Run.objects.get(pk=unknown_payment.pk)
    assert (run.status, run.attention_reason) == (RunStatus.ATTENTION,
                                                  AttentionReason.ENDED_UNSETTLED)
