"""A tool call is named by its id as the run page shows it, TURN.INDEX. One written otherwise
is input to correct, refused by one reading of the id (runs.operator.action_input.
call_id_problem) at every door in the same words, the field named: the API answers 422 with
`errors` naming `call` (it answered 409 `refused`, "run N has no tool call 'abc'", as if the
run lacked a call the person named), the console names the tool call, the command line its
--call. A well-formed id stays the transition's answer: a refusal (409), not a fault of the
body. Nothing is written either way."""

import pytest

from tests.console.test_the_console_the_api_and_the_cli_answer_each_action_alike_in_each_state import (  # noqa: E501
    STATES,
    ask,
    doors,  # noqa: F401 (a fixture)
)

pytestmark = pytest.mark.django_db

FORM = "the call is TURN.INDEX, as the run page shows it (e.g. 2.0)"
MALFORMED = ["abc", "2", "2.0.1", "-1.0", "+1.0", "1,0", "١.٠", "2.x"]
ACTIONS = ["cancel_tool_call", "retry_tool_call", "reconcile_tool_call",
           "compensate_tool_call"]


def _given(action: str, call: str) -> dict:
    given = {"reason": "INC-7", "step": "create-task", "call": call}
    if action == "reconcile_tool_call":
        given |= {"mode": "not_found", "evidence": "no posting in the ledger"}
    return given


@pytest.mark.parametrize("action", ACTIONS)
@pytest.mark.parametrize("call", MALFORMED)
def test_a_call_not_written_turn_index_is_refused_naming_the_field(doors, script, action,  # noqa: F811
                                                                   call):
    run = STATES["failed_write"](script)
    given = _given(action, call)

    response = doors.api.post(f"/api/runs/{run.pk}/actions/{action}", given,
                              content_type="application/json")
    assert response.status_code == 422, response.content
    said = f"tool call {call!r}: {FORM}; nothing was done."
    assert response.json()["detail"] == said
    assert [e["loc"] for e in response.json()["errors"]] == [["call"]]

    # The command line names its option, with what was given to it (STEP:TURN.INDEX).
    assert doors.cli_takes(run, action, given) == f"--call 'create-task:{call}': {FORM}"
    answers = {door: ask(doors, door, run, action, given) for door in ("api", "console", "cli")}
    assert answers["console"] == answers["api"]
    for answer in answers.values():
        assert answer.outcome == "refused" and answer.records == [] and answer.requests == []


@pytest.mark.parametrize("action", ACTIONS)
def test_a_call_written_turn_index_that_the_run_lacks_is_a_refusal_not_a_fault_of_the_body(
        doors, script, action):  # noqa: F811
    run = STATES["failed_write"](script)
    given = _given(action, "9.9")
    response = doors.api.post(f"/api/runs/{run.pk}/actions/{action}", given,
                              content_type="application/json")
    assert response.status_code == 409, response.content
    assert response.json()["error"] == "refused"
    answers = {door: ask(doors, door, run, action, given) for door in ("api", "console", "cli")}
    assert answers["console"] == answers["api"] == answers["cli"]
    assert answers["api"].outcome == "refused" and answers["api"].records == []
