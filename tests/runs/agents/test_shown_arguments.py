"""What people and audit records see of a tool call's arguments."""

from pydantic import BaseModel

from audit.redaction import REDACTED, shown_arguments
from runs.definitions.definition import Workflow
from tests.workflows import OrderIn


class PayArgs(BaseModel):
    iban: str
    amount: int


payments = Workflow("test-shown-arguments", version=1, input=OrderIn, register=False)
agent = payments.agent("pay", system_prompt="Pay.")


@agent.tool("pay", kind="write", args=PayArgs, redact=("iban",))
def pay(ctx, args):
    """Pay."""


@agent.tool("note", kind="write", args=PayArgs)
def note(ctx, args):
    """Note."""


def test_a_declared_field_is_masked_in_arguments_that_parsed():
    shown = shown_arguments(pay, {"iban": "DE89370400440532013000", "amount": 5})
    assert shown == {"iban": REDACTED, "amount": 5}


def test_unparsed_arguments_of_a_tool_with_declared_fields_are_masked_whole():
    # Invalid arguments are kept as the text the model sent: the field may be anywhere.
    raw = '{"iban": "DE89370400440532013000", "amount": 5'
    assert shown_arguments(pay, raw) == REDACTED
    assert "DE89" not in str(shown_arguments(pay, ["DE89370400440532013000"]))


def test_unparsed_arguments_of_a_tool_without_declared_fields_are_shown():
    assert shown_arguments(note, "not json at all") == "not json at all"
