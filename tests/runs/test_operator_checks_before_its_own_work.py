"""An operator action that does work of its own before its transition (asks the remote
system by key, builds what an undo will send) is checked first, with the transition's own
rules: an unknown step is named as the run's, a run or a call that would refuse the action is
never looked up in another system, and a remote reference a person gives must fit whole."""

import pytest
from django.utils import timezone

from audit.chain import Actor
from audit.models import AuditRecord
from runs.machine.errors import ReasonRequired, TransitionNotAllowed
from runs.machine.keys import tool_call_key, tool_compensation_key
from runs.machine.transitions.agent_calls import args_hash
from runs.models import AttentionReason, RunStatus, Step, StepStatus, ToolCall, ToolCallStatus
from runs.operator.actions import ACTIONS, ActionInput, ActionInputError
from tests.factories import new_run, place, step

pytestmark = pytest.mark.django_db

OPERATOR = Actor(kind=AuditRecord.ActorKind.USER, label="olga", user_id=101)
DONE = {"fetch": StepStatus.SUCCEEDED, "classify": StepStatus.SUCCEEDED,
        "create-task": StepStatus.SUCCEEDED, "post-ledger": StepStatus.SUCCEEDED}


def _perform(action: str, run, **given):
    return ACTIONS[action].perform(run.pk, actor=OPERATOR,
                                   given=ActionInput(**{"reason": "checked", **given}))


def _unknown_create_task():
    return place(new_run(), status=RunStatus.ATTENTION,
                 attention_reason=AttentionReason.UNKNOWN_OUTCOME,
                 step_statuses={"fetch": StepStatus.SUCCEEDED, "classify": StepStatus.SUCCEEDED,
                                "create-task": StepStatus.UNKNOWN})


def _agent_run(*, status: str, step_status: str, calls: dict[int, str]):
    """A test-agent run whose agent step holds write-note calls (index: status) of turn 1."""
    run = place(new_run("test-agent"), status=status, step_statuses={"assist": step_status})
    for index, call_status in calls.items():
        key = tool_call_key(run.workflow_name, run.business_key, "assist", 1, 1, index,
                            "write-note")
        ToolCall.objects.create(
            step=step(run, "assist"), turn=1, index=index, call_id=f"c{index}",
            tool="write-note", kind="write", arguments={"text": "hi"},
            args_hash=args_hash({"text": "hi"}), status=call_status, idempotency_key=key,
            compensation_key=tool_compensation_key(key), attempt=1,
            started_at=timezone.now(), updated_at=timezone.now())
    return run


@pytest.mark.parametrize("action, given", [
    ("reconcile", {"step": "nosuch"}),
    ("reconcile_tool_call", {"step": "nostep", "call": "1.0"}),
    ("confirm_compensation", {"step": "nosuch"}),
])
@pytest.mark.parametrize("where", ["in attention", "queued"])
def test_an_unknown_step_is_named_as_the_runs_whether_or_not_the_action_is_allowed(
        action, given, where):
    run = _unknown_create_task() if where == "in attention" else new_run()
    with pytest.raises(TransitionNotAllowed,
                       match=rf"^run {run.pk} has no step '{given['step']}'$"):
        _perform(action, run, **given)


def test_a_step_is_not_looked_up_by_key_where_the_transition_would_refuse(script):
    finished = place(new_run(), status=RunStatus.COMPLETED, step_statuses=DONE)
    with pytest.raises(TransitionNotAllowed,
                       match=r"^Reconcile is not possible .*: it has completed \(completed\)"):
        _perform("reconcile", finished, step="create-task")
    settled = place(new_run(), status=RunStatus.ATTENTION, step_statuses=DONE)
    with pytest.raises(TransitionNotAllowed, match="only an unknown or failed step"):
        _perform("reconcile", settled, step="create-task")
    unknown = _unknown_create_task()
    with pytest.raises(ReasonRequired):
        _perform("reconcile", unknown, step="create-task", reason=" ")
    assert script.reconcile_calls == []

    # Where the transition accepts it, the remote system is asked, once.
    _perform("reconcile", unknown, step="create-task")
    assert [name for name, _ in script.reconcile_calls] == ["create-task"]
    assert step(unknown, "create-task").status == StepStatus.FAILED  # found nothing


def test_a_tool_call_is_not_looked_up_by_key_where_the_transition_would_refuse(script):
    finished = _agent_run(status=RunStatus.COMPLETED, step_status=StepStatus.SUCCEEDED,
                          calls={0: ToolCallStatus.SUCCEEDED})
    with pytest.raises(TransitionNotAllowed, match=r"^tool call 1.0 \(write-note\) of assist "
                                                   r"is already settled: it succeeded"):
        _perform("reconcile_tool_call", finished, step="assist", call="1.0")
    # The call may be reconciled, but not in the run's state.
    queued = _agent_run(status=RunStatus.QUEUED, step_status=StepStatus.PENDING,
                        calls={0: ToolCallStatus.UNKNOWN})
    with pytest.raises(TransitionNotAllowed,
                       match=r"^Reconcile tool call is not possible .* \(queued\)"):
        _perform("reconcile_tool_call", queued, step="assist", call="1.0")
    # The step has an unknown call, but not this one.
    stuck = _agent_run(status=RunStatus.ATTENTION, step_status=StepStatus.UNKNOWN,
                       calls={0: ToolCallStatus.SUCCEEDED, 1: ToolCallStatus.UNKNOWN})
    with pytest.raises(TransitionNotAllowed, match=r"is already settled: .*; tool call 1.1 "
                                                   r"\(write-note\) of assist can be "
                                                   "reconciled now$"):
        _perform("reconcile_tool_call", stuck, step="assist", call="1.0")
    with pytest.raises(TransitionNotAllowed, match="has no tool call '1.7'"):
        _perform("reconcile_tool_call", stuck, step="assist", call="1.7")
    assert script.reconcile_calls == []

    _perform("reconcile_tool_call", stuck, step="assist", call="1.1")
    assert [name for name, _ in script.reconcile_calls] == ["write-note"]
    assert ToolCall.objects.get(step__run=stuck, index=1).status == ToolCallStatus.FAILED


def test_a_remote_reference_a_person_gives_is_refused_when_it_would_not_fit_whole():
    run = _unknown_create_task()
    records = AuditRecord.objects.filter(run=run).count()
    with pytest.raises(ActionInputError, match="301 characters long.* at most 300"):
        _perform("reconcile", run, step="create-task", mode="found", remote_ref="R" * 301,
                 evidence="seen in the tracker")
    assert step(run, "create-task").status == StepStatus.UNKNOWN
    assert AuditRecord.objects.filter(run=run).count() == records

    _perform("reconcile", run, step="create-task", mode="found", remote_ref="R" * 300,
             evidence="seen in the tracker")
    settled = Step.objects.get(run=run, name="create-task")
    assert (settled.status, settled.remote_ref) == (StepStatus.SUCCEEDED, "R" * 300)
