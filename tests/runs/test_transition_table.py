"""Every operator and automation transition, from every run state: it either does what the
table allows or is refused with a clear error and no change at all."""

import re

import pytest

from audit.models import AuditRecord
from runs.definitions.definition import Found
from runs.machine import transitions
from runs.machine.errors import TransitionNotAllowed
from runs.machine.transitions import RUN_TRANSITIONS
from runs.models import AttentionReason, Run, RunStatus, StepStatus
from tests.factories import SYSTEM, new_run, place

pytestmark = pytest.mark.django_db

ALL_STATES = [s.value for s in RunStatus]

# Each operator transition, with the step state that makes it meaningful, what to call,
# and the run status it leads to when allowed.
OPERATOR_ACTIONS = {
    "resume": ({}, lambda run: transitions.resume(run.pk, actor=SYSTEM, reason="r"),
               RunStatus.QUEUED),
    "reconcile": ({"create-task": StepStatus.UNKNOWN},
                  lambda run: transitions.reconcile(run.pk, step_name="create-task",
                                                    verdict=Found("T-1"), actor=SYSTEM,
                                                    reason="r", evidence="seen in tracker"),
                  RunStatus.QUEUED),
    "retry_step": ({"create-task": StepStatus.FAILED},
                   lambda run: transitions.retry_step(run.pk, step_name="create-task",
                                                      actor=SYSTEM, reason="r"),
                   RunStatus.QUEUED),
    "ask_again": ({"fetch": StepStatus.SUCCEEDED, "classify": StepStatus.SUCCEEDED},
                  lambda run: transitions.ask_again(run.pk, step_name="classify",
                                                    actor=SYSTEM, reason="r"),
                  RunStatus.QUEUED),
    "compensate": ({"create-task": StepStatus.SUCCEEDED},
                   lambda run: transitions.compensate(run.pk, actor=SYSTEM, reason="r"),
                   RunStatus.COMPENSATING),
    "decide_approval": ({"approve": StepStatus.WAITING},
                        lambda run: transitions.decide_approval(
                            run.pk, step_name="approve", approved=True, actor=SYSTEM),
                        RunStatus.QUEUED),
    "approval_timed_out": ({"approve": StepStatus.WAITING},
                           lambda run: transitions.approval_timed_out(
                               run.pk, step_name="approve", actor=SYSTEM, reason="r"),
                           RunStatus.ATTENTION),
    "confirm_compensation": ({"create-task": StepStatus.SUCCEEDED,
                              "post-ledger": StepStatus.SUCCEEDED},
                             lambda run: transitions.confirm_compensation(
                                 run.pk, step_name="post-ledger", actor=SYSTEM, reason="r"),
                             RunStatus.COMPENSATING),
    "cancel": ({}, lambda run: transitions.cancel(run.pk, actor=SYSTEM, reason="r"), None),
    "terminate": ({}, lambda run: transitions.terminate(run.pk, actor=SYSTEM, reason="r"),
                  RunStatus.TERMINATED),
    "reopen": ({}, lambda run: transitions.reopen(run.pk, actor=SYSTEM, reason="r"),
               RunStatus.ATTENTION),
}


def _row_state(run_id):
    run = Run.objects.get(pk=run_id)
    steps = list(run.steps.values_list("name", "status", "attempt", "remote_ref"))
    return (run.status, run.fencing_token, run.audit_seq, run.cancel_requested, steps,
            AuditRecord.objects.filter(run_id=run_id).count())


def test_every_transition_in_the_table_names_real_states():
    for action, move in RUN_TRANSITIONS.items():
        assert move.sources <= set(ALL_STATES) | {transitions.NEW}, action
        assert move.targets <= set(ALL_STATES), action


def test_final_states_are_left_only_by_reopen():
    # And by a re-run from a chosen step: as explicit, a person's with a reason, and a new
    # generation with new keys (runs.machine.transitions.rerun).
    for action, move in RUN_TRANSITIONS.items():
        left = move.sources & {RunStatus.COMPLETED, RunStatus.COMPENSATED, RunStatus.TERMINATED}
        assert not left or action in ("reopen", "rerun_from_step"), action


@pytest.mark.parametrize("state", ALL_STATES)
@pytest.mark.parametrize("action", sorted(OPERATOR_ACTIONS))
def test_operator_transition_from_each_state_applies_or_is_refused_without_change(action, state):
    step_statuses, call, target = OPERATOR_ACTIONS[action]
    workflow = "test-approval" if "approval" in action else "test-orders"
    paused = {"attention_reason": AttentionReason.COMPENSATION_PAUSED} \
        if action == "confirm_compensation" else {}
    run = place(new_run(workflow), status=state, step_statuses=step_statuses, **paused)
    before = _row_state(run.pk)

    if transitions.allowed(action, state):
        call(run)
        after = Run.objects.get(pk=run.pk)
        if action == "cancel":
            # Cancel stops at the next step boundary: at once unless a step is in flight.
            expected = RunStatus.RUNNING if state == RunStatus.RUNNING else RunStatus.TERMINATED
            assert after.status == expected
            assert after.cancel_requested == (state == RunStatus.RUNNING)
        else:
            assert after.status == target
        assert after.audit_seq == before[2] + 1
        last = AuditRecord.objects.filter(run=run).order_by("-seq").first()
        assert last.before["status"] == state
        assert last.actor_label == "test"
    else:
        # An operator action is refused in a person's words, named as the console labels it
        # (transitions.LABELS), and so is a person's decision; an automation's transition in
        # the table's own.
        said = (rf"^{re.escape(transitions.LABELS[action])} is not possible for run {run.pk} "
                rf"\(.*\): .* \({state}[:)]" if action in transitions.LABELS
                else rf"^the decision cannot be applied to run {run.pk} \(.*\): .* \({state}\)"
                if action == "decide_approval" else f"{action} is not allowed .* {state}")
        with pytest.raises(TransitionNotAllowed, match=said):
            call(run)
        assert _row_state(run.pk) == before


@pytest.mark.parametrize("state", ALL_STATES)
def test_claim_takes_only_a_queued_or_due_waiting_run(state):
    run = place(new_run(), status=state)
    before = _row_state(run.pk)
    lease = transitions.claim_run(run.pk, worker="w1")
    if state == RunStatus.QUEUED:
        assert lease is not None and lease.token == before[1] + 1
        assert Run.objects.get(pk=run.pk).status == RunStatus.RUNNING
    else:
        # A waiting run without a due time is not claimable either.
        assert lease is None
        assert _row_state(run.pk) == before


@pytest.mark.parametrize("state", ALL_STATES)
def test_expire_lease_acts_only_on_a_held_run_past_its_lease(state):
    from datetime import timedelta

    from django.utils import timezone

    past = timezone.now() - timedelta(seconds=5)
    run = place(new_run(), status=state, lease_expires_at=past, lease_owner="gone")
    before = _row_state(run.pk)
    changed = transitions.expire_lease(run.pk)
    assert changed == (state in (RunStatus.RUNNING, RunStatus.COMPENSATING))
    if changed:
        run = Run.objects.get(pk=run.pk)
        # A compensating run stays compensating: its compensation is sent again.
        expected = RunStatus.COMPENSATING if state == RunStatus.COMPENSATING else RunStatus.QUEUED
        assert run.status == expected and run.fencing_token == before[1] + 1
        assert run.lease_owner == ""
    else:
        assert _row_state(run.pk) == before


def test_step_level_refusals_name_the_step_and_change_nothing():
    run = place(new_run(), status=RunStatus.ATTENTION)
    before = _row_state(run.pk)
    with pytest.raises(TransitionNotAllowed, match="step create-task .* is pending"):
        transitions.retry_step(run.pk, step_name="create-task", actor=SYSTEM, reason="r")
    with pytest.raises(TransitionNotAllowed, match="step fetch .* is pending"):
        transitions.reconcile(run.pk, step_name="fetch", verdict=Found("x"), actor=SYSTEM,
                              reason="r", evidence="e")
    with pytest.raises(TransitionNotAllowed, match="has no step 'nope'"):
        transitions.retry_step(run.pk, step_name="nope", actor=SYSTEM, reason="r")
    assert _row_state(run.pk) == before


