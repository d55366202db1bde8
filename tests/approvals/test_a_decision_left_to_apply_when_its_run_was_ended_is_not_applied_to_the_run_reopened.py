"""A decision recorded while its run passed through queued (on its way back to the same
wait) is left for the sweep to apply. If a person then ends the run, the decision can no
longer be applied: it was made for a wait that ended with the run. Reopened and resumed,
the run waits on the same step again, for a decision made after the reopen; the one left
from before must not send it on with nobody acting, whether the sweep comes by while the
run is ended or only once it waits again."""

import uuid

from approvals import application, decisions, operator_actions, requests
from approvals.models import ApprovalRequest
from runs.execution import executor
from runs.models import Run, RunStatus, Step, StepStatus
from runs.operator.actions import ActionInput
from tests.approvals.conftest import later
from tests.factories import place


def _act(action, run_id, user, reason):
    operator_actions.act(action, run_id, user=user, given=ActionInput(reason=reason))


def test_a_decision_left_to_apply_is_not_applied_once_its_run_was_ended_and_reopened(
        pending, ann, operators, t0):
    olga, _ = operators
    run_id = pending.run_id
    # Passing through queued (an operator's resume does not take a run waiting for a
    # decision there: operator_rules.awaited_approval), its step still waiting.
    place(pending.run, status=RunStatus.QUEUED)
    recorded = decisions.decide(pending.pk, user=ann, approved=True, decision_id=uuid.uuid4(),
                                now=t0)
    assert recorded.recorded and recorded.application == application.PENDING
    _act("terminate", run_id, olga, "wrong vendor")
    _act("reopen", run_id, olga, "terminated by mistake")
    _act("resume", run_id, olga, "carry on")
    executor.advance_run(run_id, worker="w1")
    assert Run.objects.get(pk=run_id).status == RunStatus.WAITING

    application.apply_pending_decisions(now=later(t0, seconds=60))

    pending.refresh_from_db()
    assert pending.settled_at is not None
    assert pending.apply_error.startswith(application.REFUSED)
    assert Run.objects.get(pk=run_id).status == RunStatus.WAITING
    assert Step.objects.get(run_id=run_id, name="approve").status == StepStatus.WAITING
    # The wait after the reopen is asked anew, of a person.
    assert requests.open_pending_requests(now=later(t0, seconds=61)) == 1
    assert ApprovalRequest.objects.get(run_id=run_id, status="pending").pk != pending.pk
