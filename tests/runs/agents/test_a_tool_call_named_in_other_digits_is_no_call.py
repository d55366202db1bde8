"""An operator action aimed at one tool call names it TURN.INDEX in ASCII digits, as every
number given from outside is read (storable.whole_number): "١.٠" (Arabic-Indic digits) or
"+1.0" name no call, by the console, the API and the CLI alike, where int() had read them as
a call the person did not name, and acted on it. Every door refuses them as not written
TURN.INDEX (ActionInput, action_input.call_id_problem); the transition itself, asked for
them, finds no call. The blanks around what a person typed are taken off at every door
(ActionInput), so " 1.0" there is the call 1.0; the transition itself, asked for " 1.0" or
"1.0\n", finds no call."""

import pytest

from audit.models import AuditRecord
from runs.machine import transitions
from runs.machine.errors import TransitionNotAllowed
from runs.operator.action_input import ActionInputError
from runs.operator.actions import ACTIONS, ActionInput
from tests.agent_runs import ACTOR, LARGE, advance, start_triage

pytestmark = pytest.mark.django_db(transaction=True)
ARABIC_INDIC = str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩")


@pytest.fixture(autouse=True)
def sandbox(live_sandbox):
    return live_sandbox


def test_a_call_written_in_other_digits_spaces_or_underscores_names_no_call():
    run = advance(start_triage(LARGE))
    (call,) = transitions.waiting_tool_calls(run)
    # Each is read as this very call by int(); none is written as the run page shows it.
    for written in (call.ref.translate(ARABIC_INDIC), f"+{call.ref}"):
        with pytest.raises(ActionInputError, match=r"the call is TURN\.INDEX"):
            ActionInput(reason="r", step="triage", call=written)
    for written in (call.ref.translate(ARABIC_INDIC), f"+{call.ref}", f" {call.ref}",
                    f"{call.ref}\n"):
        with pytest.raises(TransitionNotAllowed, match="has no tool call"):
            transitions.cancel_tool_call(run.pk, step_name="triage", call_ref=written,
                                         actor=ACTOR, reason="r")
    call.refresh_from_db()
    assert call.status != "cancelled"
    assert not AuditRecord.objects.filter(run=run, action="tool_call_cancelled").exists()
    # The call as the run page shows it is found.
    ACTIONS["cancel_tool_call"].perform(
        run.pk, actor=ACTOR, given=ActionInput(reason="r", step="triage", call=call.ref))
    call.refresh_from_db()
    assert call.status == "cancelled"
