"""A run's wait for a person is a row of runs.ApprovalWait for exactly as long as it lasts:
inserted with the transition that makes the run wait, deleted by every transition that
ends the wait (a decision, a timeout, cancel, terminate), whichever it is, because the
kernel deletes it where a run leaves `waiting` (kernel._Change.move). The approvals sweep
reads only these rows. (Resume is not one of them: a run waiting for a person's approval is
not resumed, its request decides it.)"""

import pytest
from django.contrib.auth.models import User

from approvals import requests
from approvals.models import ApprovalRequest, RequestStatus
from approvals.waits import waiting_approval_steps
from audit.chain import Actor
from runs.execution import executor
from runs.machine import transitions
from runs.machine.transitions.kernel import RUN_TRANSITIONS, WAITING, Change
from runs.models import ApprovalWait, Run, RunStatus, Step, StepStatus
from tests.approvals.conftest import later, waiting_run

pytestmark = pytest.mark.django_db

OPS = Actor.system("ops")


def waits(run: Run) -> list[tuple[str, int | None]]:
    return list(ApprovalWait.objects.filter(run=run).values_list("step_name", "tool_call"))


def approver() -> Actor:
    return Actor.for_user(User.objects.get(username="ann"))


# How each transition out of an approval wait is taken, and the run's status after it.
ENDINGS = {
    "approved": (lambda run: transitions.decide_approval(
        run.pk, step_name="approve", approved=True, actor=approver()), RunStatus.QUEUED),
    "rejected": (lambda run: transitions.decide_approval(
        run.pk, step_name="approve", approved=False, actor=approver(), comment="no"),
        RunStatus.ATTENTION),
    "timed out": (lambda run: transitions.approval_timed_out(
        run.pk, step_name="approve", actor=OPS, reason="nobody decided"), RunStatus.ATTENTION),
    "terminated": (lambda run: transitions.terminate(run.pk, actor=OPS, reason="withdrawn"),
                   RunStatus.TERMINATED),
    "cancelled": (lambda run: transitions.cancel(run.pk, actor=OPS, reason="withdrawn"),
                  RunStatus.TERMINATED),
}


def test_a_run_that_reaches_an_approval_step_waits_on_one_row(approvers):
    run = waiting_run()
    assert waits(run) == [("approve", None)]
    # The sweep opens its request from that row; the row stays while the step waits.
    assert requests.open_pending_requests() == 1
    assert waits(run) == [("approve", None)]
    assert list(waiting_approval_steps()) == []  # its request is open


@pytest.mark.parametrize("ending", list(ENDINGS))
def test_every_way_out_of_an_approval_wait_removes_its_row(approvers, ending):
    run = waiting_run()
    requests.open_pending_requests()
    end, status = ENDINGS[ending]
    end(run)
    run.refresh_from_db()
    assert run.status == status
    assert waits(run) == []
    assert list(waiting_approval_steps()) == []


def test_a_resumed_run_that_comes_back_to_its_approval_waits_on_one_row_again(approvers):
    run = waiting_run()
    transitions.approval_timed_out(run.pk, step_name="approve", actor=OPS,
                                   reason="nobody decided")
    transitions.resume(run.pk, actor=OPS, reason="look again")
    executor.advance_run(run.pk, worker="w1")
    run.refresh_from_db()
    assert run.status == RunStatus.WAITING
    assert waits(run) == [("approve", None)]


def test_a_superseded_request_leaves_the_wait_standing(approvers, t0):
    run = waiting_run()
    requests.open_pending_requests(now=t0)
    old = ApprovalRequest.objects.get(run=run, status=RequestStatus.PENDING)
    new = requests.supersede(old, {"changed": True}, "f" * 64, later(t0, minutes=5))
    assert new.status == RequestStatus.PENDING
    # The step still waits, now on the new request: the run's wait is the same one row.
    assert waits(run) == [("approve", None)]
    assert Step.objects.get(run=run, name="approve").status == StepStatus.WAITING


@pytest.mark.parametrize("action", [a for a, move in RUN_TRANSITIONS.items()
                                    if WAITING in move.sources])
def test_the_kernel_ends_the_waits_of_every_move_out_of_waiting(action):
    # The rule is the kernel's, not each transition's: any move from waiting to another
    # state (a transition added later included) ends whatever the run waited on.
    for to in RUN_TRANSITIONS[action].targets:
        run = Run(pk=1, status=RunStatus.WAITING, audit_seq=0, audit_head="")
        change = Change(run, action, OPS, run.created_at)
        change.wait_for_person(Step(name="approve"))
        change.move(to)
        assert change.waits_ended == (to != WAITING), (action, to)
        assert change.waits_begun == ([] if to != WAITING else change.waits_begun)
