"""The one table of operator actions and the rules the transitions enforce for every caller:
a reason, no blind resend of an unknown outcome, a second person after a high-impact effect,
and an action offered exactly where the transition accepts it."""

import pytest

from audit.chain import Actor
from audit.models import AuditRecord
from runs.definitions.definition import Found, NotFound
from runs.machine import transitions
from runs.machine.errors import (
    EvidenceRequired,
    ReasonRequired,
    SecondPersonRequired,
    TransitionNotAllowed,
)
from runs.machine.transitions.tool_call_rules import TOOL_CALL_ACTIONS
from runs.models import AttentionReason, Run, RunStatus, Step, StepStatus
from runs.operator.actions import ACTIONS, ActionInput, offered
from tests.factories import SYSTEM, new_run, place

pytestmark = pytest.mark.django_db

ALL_STATES = [s.value for s in RunStatus]
# The actions on a run sleeping on a timer or waiting for an event (none of test-orders).
WAIT_ACTIONS = ("wake_timer", "event_received", "skip_event")
OPERATOR = Actor(kind=AuditRecord.ActorKind.USER, label="olga", user_id=101)
SECOND = Actor(kind=AuditRecord.ActorKind.USER, label="sam", user_id=102)
S = StepStatus

# Step states (of test-orders: fetch, classify, create-task, post-ledger) that make each
# operator action meaningful somewhere, plus the states that should rule actions out.
SCENARIOS = {
    "fresh": ({}, {}),
    "unknown write": ({"fetch": S.SUCCEEDED, "classify": S.SUCCEEDED,
                       "create-task": S.UNKNOWN}, {}),
    "failed write": ({"fetch": S.SUCCEEDED, "classify": S.SUCCEEDED,
                      "create-task": S.FAILED}, {}),
    "scheduled write": ({"fetch": S.SUCCEEDED, "classify": S.SUCCEEDED,
                         "create-task": S.SCHEDULED}, {}),
    "stored decision": ({"fetch": S.SUCCEEDED, "classify": S.SUCCEEDED}, {}),
    "low-impact effect": ({"fetch": S.SUCCEEDED, "classify": S.SUCCEEDED,
                           "create-task": S.SUCCEEDED, "post-ledger": S.FAILED}, {}),
    "high-impact effect": ({"fetch": S.SUCCEEDED, "classify": S.SUCCEEDED,
                            "create-task": S.SUCCEEDED, "post-ledger": S.SUCCEEDED}, {}),
    "paused at a high-impact undo": (
        {"fetch": S.SUCCEEDED, "classify": S.SUCCEEDED, "create-task": S.SUCCEEDED,
         "post-ledger": S.SUCCEEDED},
        {"attention_reason": AttentionReason.COMPENSATION_PAUSED}),
    "partly compensated": ({"fetch": S.SUCCEEDED, "classify": S.SUCCEEDED,
                            "create-task": S.COMPENSATED, "post-ledger": S.FAILED}, {}),
}


def _placed(state: str, scenario: str) -> Run:
    step_statuses, fields = SCENARIOS[scenario]
    run = place(new_run(), status=state, step_statuses=step_statuses, **fields)
    Step.objects.filter(run=run, status=S.SUCCEEDED).update(remote_ref="REF-1")
    return run


def _steps(run: Run) -> list[Step]:
    return list(Step.objects.filter(run=run).order_by("position"))


def _request(action: str, step: str = "") -> ActionInput:
    if action == "reconcile":
        return ActionInput(reason="checked", step=step, mode="found", remote_ref="T-9",
                       evidence="seen in the tracker")
    if action in TOOL_CALL_ACTIONS:
        # These workflows have no agent step: no step has a first tool call to act on.
        return ActionInput(reason="checked", step=step, mode="found", remote_ref="T-9",
                           evidence="seen in the ledger", call="0.0")
    return ActionInput(reason="checked", step=step)


def _accepted(action: str, state: str, scenario: str) -> bool:
    """Whether the transition itself accepts `action` here (on any step, for a step
    action), each try on a fresh run placed the same way."""
    spec = ACTIONS[action]
    targets = [s.name for s in _steps(_placed(state, scenario))] if spec.takes_step else [""]
    for target in targets:
        run = _placed(state, scenario)
        try:
            spec.perform(run.pk, actor=OPERATOR, approved_by=SECOND,
                         given=_request(action, target))
            return True
        except TransitionNotAllowed:
            continue
    return False


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
@pytest.mark.parametrize("state", ALL_STATES)
def test_an_action_is_offered_exactly_where_its_transition_accepts_it(state, scenario):
    run = _placed(state, scenario)
    shown = {a.name for a in offered(run, _steps(run))}
    accepted = {name for name in ACTIONS if _accepted(name, state, scenario)}
    assert shown == accepted


@pytest.mark.parametrize("reason", ["", "   ", "\n\t"])
@pytest.mark.parametrize("action", sorted(set(ACTIONS) - set(TOOL_CALL_ACTIONS)
                                          - set(WAIT_ACTIONS)))
def test_every_operator_transition_refuses_an_empty_reason_and_writes_nothing(action, reason):
    # The actions on one tool call: tests/console/test_agent_tool_call_actions.py, on a
    # real agent run; those on a timer or an event wait: tests/runs/test_timers.py and
    # tests/runs/test_external_events.py, on runs that wait so.
    # A run where the action would otherwise succeed.
    where = {
        "resume": (RunStatus.ATTENTION, "failed write"),
        "reconcile": (RunStatus.ATTENTION, "unknown write"),
        "retry_step": (RunStatus.ATTENTION, "failed write"),
        "ask_again": (RunStatus.ATTENTION, "stored decision"),
        "compensate": (RunStatus.ATTENTION, "low-impact effect"),
        "confirm_compensation": (RunStatus.ATTENTION, "paused at a high-impact undo"),
        "cancel": (RunStatus.ATTENTION, "fresh"),
        "terminate": (RunStatus.ATTENTION, "fresh"),
        "reopen": (RunStatus.TERMINATED, "fresh"),
        "rerun_from_step": (RunStatus.ATTENTION, "failed write"),
    }[action]
    spec = ACTIONS[action]
    run = _placed(*where)
    step = spec.eligible_steps(run, _steps(run))[0].name if spec.takes_step else ""
    assert spec.refusal(run, _steps(run)) is None, "the run must allow the action"
    before = (Run.objects.get(pk=run.pk).audit_seq, list(Step.objects.filter(run=run)
                                                         .values_list("status", "attempt")))
    given = _request(action, step)
    with pytest.raises(ReasonRequired, match="needs a reason"):
        spec.perform(run.pk, actor=OPERATOR, approved_by=SECOND,
                     given=ActionInput(**{**given.__dict__, "reason": reason}))
    after = (Run.objects.get(pk=run.pk).audit_seq, list(Step.objects.filter(run=run)
                                                        .values_list("status", "attempt")))
    assert after == before


@pytest.mark.parametrize("evidence", ["", "  \n"])
@pytest.mark.parametrize("verdict", [Found("T-9"), NotFound()], ids=["found", "not found"])
def test_settling_an_outcome_without_evidence_is_refused_and_writes_nothing(verdict, evidence):
    # The transition refuses, not the form: the API, the CLI and the console call it alike.
    run = _placed(RunStatus.ATTENTION, "unknown write")
    seq = Run.objects.get(pk=run.pk).audit_seq
    with pytest.raises(EvidenceRequired, match="needs the evidence"):
        transitions.reconcile(run.pk, step_name="create-task", verdict=verdict,
                              actor=OPERATOR, reason="checked", evidence=evidence)
    assert Run.objects.get(pk=run.pk).audit_seq == seq
    step = Step.objects.get(run=run, name="create-task")
    assert (step.status, step.remote_ref) == (S.UNKNOWN, "")


def test_retry_step_on_a_step_whose_outcome_is_unknown_is_refused_until_it_is_reconciled():
    run = _placed(RunStatus.ATTENTION, "unknown write")
    with pytest.raises(TransitionNotAllowed, match="unknown: reconcile it first"):
        transitions.retry_step(run.pk, step_name="create-task", actor=OPERATOR,
                               reason="resend it")
    assert Step.objects.get(run=run, name="create-task").status == S.UNKNOWN
    assert "retry_step" not in {a.name for a in offered(run, _steps(run))}

    transitions.reconcile(run.pk, step_name="create-task", verdict=NotFound(), actor=OPERATOR,
                          reason="not in the tracker", evidence="searched by key")
    transitions.retry_step(run.pk, step_name="create-task", actor=OPERATOR, reason="resend")
    assert Step.objects.get(run=run, name="create-task").status == S.PENDING


@pytest.mark.parametrize("action", ["cancel", "terminate", "compensate"])
def test_ending_or_undoing_after_a_high_impact_effect_needs_a_second_person(action):
    run = _placed(RunStatus.ATTENTION, "high-impact effect")
    seq = run.audit_seq
    call = {"cancel": transitions.cancel, "terminate": transitions.terminate,
            "compensate": transitions.compensate}[action]
    with pytest.raises(SecondPersonRequired, match="post-ledger"):
        call(run.pk, actor=OPERATOR, reason="stop it")
    with pytest.raises(SecondPersonRequired, match="someone other than olga"):
        call(run.pk, actor=OPERATOR, reason="stop it", approved_by=OPERATOR)
    assert Run.objects.get(pk=run.pk).audit_seq == seq

    call(run.pk, actor=OPERATOR, reason="stop it", approved_by=SECOND)
    record = AuditRecord.objects.filter(run=run).order_by("-seq").first()
    assert record.actor_label == "olga" and record.data["approved_by"] == "sam"


def test_a_low_impact_effect_alone_needs_no_second_person():
    run = _placed(RunStatus.ATTENTION, "low-impact effect")
    assert not ACTIONS["cancel"].needs_second_person(_steps(run))
    transitions.cancel(run.pk, actor=OPERATOR, reason="not needed")
    assert Run.objects.get(pk=run.pk).status == RunStatus.TERMINATED


def test_ask_the_model_again_is_not_offered_on_a_workflow_without_a_decision():
    run = place(new_run("test-saga"), status=RunStatus.ATTENTION,
                step_statuses={"reserve-stock": S.SUCCEEDED})
    assert "ask_again" not in {a.name for a in offered(run, _steps(run))}
    with pytest.raises(TransitionNotAllowed, match="not a stored decision"):
        transitions.ask_again(run.pk, step_name="reserve-stock", actor=SYSTEM, reason="why")


def test_compensate_is_not_offered_while_a_step_is_unsettled():
    run = place(new_run(), status=RunStatus.ATTENTION, step_statuses={
        "create-task": S.SUCCEEDED, "post-ledger": S.UNKNOWN})
    assert ACTIONS["compensate"].refusal(run, _steps(run)).startswith("settle post-ledger")
    assert "compensate" not in {a.name for a in offered(run, _steps(run))}


def test_a_waiting_approval_step_cannot_be_reconciled_into_an_approval():
    run = place(new_run("test-approval"), status=RunStatus.ATTENTION,
                step_statuses={"prepare": S.SUCCEEDED, "approve": S.WAITING})
    with pytest.raises(TransitionNotAllowed, match="only an unknown or failed step"):
        transitions.reconcile(run.pk, step_name="approve", verdict=Found("yes"),
                              actor=OPERATOR, reason="approved on the phone",
                              evidence="a phone call with the approver")
    assert Step.objects.get(run=run, name="approve").status == S.WAITING
