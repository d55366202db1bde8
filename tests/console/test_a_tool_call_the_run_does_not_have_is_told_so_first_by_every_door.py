"""An action aimed at a tool call the run does not have is told so, naming the call, before
anything of the run's or the step's state, which say nothing of it: asked to retry call
9.9 of an agent step whose outcome is unknown, every door answered "step triage of run N is
unknown: it did not stop on a failed tool call", as if call 9.9 were there and merely not
failed; on a run a worker holds, "only Cancel or Terminate". The one check of the call named
(runs.machine.transitions.operator_rules.named_target) comes first in every operator
transition aimed at a call, the same at the console, the API and the command line.
Nothing is written."""

import pytest
from django.test import Client

from api.tokens import token_create
from runs.models import RunStatus, StepStatus
from tests.agent_runs import SMALL, posting_left_unknown, start_triage
from tests.console.test_the_console_the_api_and_the_cli_answer_each_action_alike_in_each_state import (  # noqa: E501
    Doors,
    ask,
)

pytestmark = pytest.mark.django_db(transaction=True)

DOORS = ("console", "api", "cli")
CALL_ACTIONS = ("retry_tool_call", "cancel_tool_call", "reconcile_tool_call",
                "compensate_tool_call")


@pytest.fixture
def doors(operator):
    console = Client()
    console.force_login(operator)
    _, plaintext = token_create(name="ops", workflows=["invoice-triage"],
                                acting_user=operator)
    return Doors(operator, console, Client(HTTP_AUTHORIZATION=f"Bearer {plaintext}"))


def _given(action: str, call: str) -> dict:
    given = {"reason": "INC-7", "step": "triage", "call": call}
    if action == "reconcile_tool_call":
        given |= {"mode": "not_found", "evidence": "no posting in the ledger"}
    return given


@pytest.mark.parametrize("action", CALL_ACTIONS)
def test_a_call_the_unknown_agent_step_does_not_have_is_named_not_the_steps_state(
        live_sandbox, doors, action):
    run = posting_left_unknown(SMALL)
    assert run.steps.get(name="triage").status == StepStatus.UNKNOWN
    answers = {door: ask(doors, door, run, action, _given(action, "9.9")) for door in DOORS}
    assert answers["console"] == answers["api"] == answers["cli"], answers
    said = answers["api"]
    assert said.words == "run RUN has no tool call '9.9' in step 'triage'", said
    assert said.outcome == "refused" and said.records == [] and said.requests == []
    assert said.status == RunStatus.ATTENTION


@pytest.mark.parametrize("action", CALL_ACTIONS)
def test_a_call_of_a_queued_run_it_does_not_have_is_named_not_the_runs_state(
        live_sandbox, doors, action):
    run = start_triage(SMALL)
    assert run.status == RunStatus.QUEUED
    answers = {door: ask(doors, door, run, action, _given(action, "9.9")) for door in DOORS}
    assert answers["console"] == answers["api"] == answers["cli"], answers
    assert answers["api"].words == "run RUN has no tool call '9.9' in step 'triage'"
    assert answers["api"].outcome == "refused" and answers["api"].records == []
    # A step the run does not have is named as such too, before the run's state.
    answers = {door: ask(doors, door, run, action, {**_given(action, "9.9"), "step": "nope"})
               for door in DOORS}
    assert answers["console"] == answers["api"] == answers["cli"], answers
    assert answers["api"].words == "run RUN has no step 'nope'"
