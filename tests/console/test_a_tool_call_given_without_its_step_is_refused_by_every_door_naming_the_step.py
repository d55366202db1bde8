"""A tool call is named by its agent step and its TURN.INDEX, which counts that step's calls:
"1.0" alone names no call. Given without its step, it is input to complete, refused at the
door by one rule (runs.operator.action_input.call_refused) before the run's state is asked:
the API answers 422 naming `step` (it answered 409 about the run's state, "Reconcile the
tool call is not possible for run N ...", as if the call had been aimed at and refused), the
console marks the step, the command line names its --call. Nothing is written."""

import pytest
from django.core.management import CommandError

from runs.machine.transitions.tool_call_rules import TOOL_CALL_ACTIONS
from tests.console.test_the_console_the_api_and_the_cli_answer_each_action_alike_in_each_state import (  # noqa: E501
    STATES,
    ask,
    command_output,
    doors,  # noqa: F401 (a fixture)
)

pytestmark = pytest.mark.django_db

SAID = ("step: a tool call is named with its agent step (TURN.INDEX counts that step's "
        "calls); give the step too; nothing was done.")


def _given(action: str) -> dict:
    given = {"reason": "INC-7", "call": "1.0"}
    if action == "reconcile_tool_call":
        given |= {"mode": "not_found", "evidence": "no posting in the ledger"}
    return given


# A run whose state refuses every tool-call action (finished), and one in attention.
@pytest.mark.parametrize("state", ["completed", "failed_write"])
@pytest.mark.parametrize("action", TOOL_CALL_ACTIONS)
def test_a_call_without_its_step_is_refused_naming_the_step_before_the_runs_state(
        doors, script, state, action):  # noqa: F811
    run = STATES[state](script)
    given = _given(action)

    response = doors.api.post(f"/api/runs/{run.pk}/actions/{action}", given,
                              content_type="application/json")
    assert response.status_code == 422, response.content
    assert response.json()["detail"] == SAID
    assert [e["loc"] for e in response.json()["errors"]] == [["step"]]

    # The console's dialog marks the field (htmx), as it marks any field refused.
    refused = doors.console.post(f"/runs/{run.pk}/{action}/",
                                 {**given, "seen": str(run.audit_seq)}, HTTP_HX_REQUEST="true")
    assert refused.status_code == 422, refused.content
    assert refused.headers["X-Refused-Field"] == "step"
    assert refused.content.decode().endswith(f"was not done: {SAID}")

    options = [arg for name, value in given.items()
               for arg in (f"--{name.replace('_', '-')}", value)]
    with pytest.raises(CommandError) as cli:
        command_output("run_action", str(run.pk), action, "--user", "olga", *options)
    assert str(cli.value) == (
        "--call '1.0': a tool call is named with its agent step (TURN.INDEX counts that "
        "step's calls); name the agent step too, as STEP:TURN.INDEX (e.g. triage:2.0), or "
        "with --step")

    answers = {door: ask(doors, door, run, action, given) for door in ("api", "console")}
    assert answers["console"] == answers["api"]
    for answer in answers.values():
        assert answer.outcome == "refused" and answer.records == [] and answer.requests == []
