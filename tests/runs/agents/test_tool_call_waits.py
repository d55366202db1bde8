"""An agent's tool call waiting for a person is a row of runs.ApprovalWait while, and only
while, the run waits on it: a decision (either way), a later call with other arguments (the
old request superseded) or the run's end removes it."""

import pytest

from runs.machine import transitions
from runs.models import ApprovalWait, Run, RunStatus
from tests.agent_runs import ACTOR, LARGE, advance, start_triage

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def sandbox(live_sandbox):
    return live_sandbox


def waits(run: Run) -> list[tuple[str, int | None]]:
    return list(ApprovalWait.objects.filter(run=run).values_list("step_name", "tool_call"))


def test_a_waiting_call_has_its_row_until_it_is_approved():
    run = advance(start_triage(LARGE))
    (call,) = transitions.waiting_tool_calls(run)
    assert waits(run) == [("triage", call.pk)]
    transitions.decide_tool_call(run.pk, step_name="triage", call_ref=call.ref,
                                 args_hash=call.args_hash, approved=True, actor=ACTOR)
    assert waits(run) == []
    assert advance(run).status == RunStatus.COMPLETED
    assert waits(run) == []


def test_a_declined_call_replaced_by_new_arguments_waits_on_the_new_call_only():
    run = advance(start_triage(LARGE, notes="[sandbox-script: invoice-triage change-args]"))
    (first,) = transitions.waiting_tool_calls(run)
    transitions.decide_tool_call(run.pk, step_name="triage", call_ref=first.ref,
                                 args_hash=first.args_hash, approved=False, actor=ACTOR,
                                 comment="too much for one posting")
    assert waits(run) == []
    run = advance(run)
    (second,) = transitions.waiting_tool_calls(run)
    assert waits(run) == [("triage", second.pk)]


def test_terminating_a_run_waiting_on_a_call_removes_its_row():
    run = advance(start_triage(LARGE))
    assert len(waits(run)) == 1
    transitions.terminate(run.pk, actor=ACTOR, reason="invoice withdrawn")
    assert waits(run) == []
