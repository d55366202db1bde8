"""A tool's `redact=` names fields of its args, which are then masked wherever the call is
shown and sealed wherever it is stored. A name its args schema does not have (a typo, a
field renamed since) was accepted silently, and the field it meant stayed in clear in every
row, record, page and archive file. Now the declaration fails when its module is imported,
naming the workflow, the step, the tool, the unknown name and the fields the args have; a
field of the tool's result alone is declared `sensitive=` (its result has no schema to check
it against). A decision's `sensitive=` names fields of its result, which its schema makes:
one the schema does not have is refused the same way. Nothing is declared on a refusal."""

import pytest
from pydantic import BaseModel, Field

from runs.definitions.definition import WRITE, Workflow, tool_approval
from runs.definitions.validation import DefinitionError
from tests.workflows import OrderIn


class PayArgs(BaseModel):
    amount: str
    iban: str
    reference: str = Field("", alias="ref")


class Verdict(BaseModel):
    category: str
    iban: str


def _pay(ctx, args):
    return {"paid": args.amount}


def _agent():
    workflow = Workflow("test-redact-mistakes", version=1, input=OrderIn, register=False)
    return workflow, workflow.agent("assist", system_prompt="Pay invoices.",
                                    approval=tool_approval(approvers=("group:ops",)))


def test_a_tool_redacting_a_field_its_args_do_not_have_is_refused_naming_the_fields_it_has():
    _, agent = _agent()
    with pytest.raises(DefinitionError) as refused:
        agent.tool("pay", kind=WRITE, args=PayArgs, redact=("iban", "ibna"))(_pay)
    assert str(refused.value) == (
        "workflow test-redact-mistakes v1, step 'assist', tool 'pay': redact names 'ibna', "
        "which its args PayArgs does not have (its fields: amount, iban, reference (or ref)); "
        "a field of its result alone is declared sensitive=(...)")
    assert agent.tools == {}


def test_a_tool_redacting_its_args_fields_by_name_or_alias_and_its_results_is_declared():
    _, agent = _agent()
    pay = agent.tool("pay", kind=WRITE, args=PayArgs, redact=("iban", "ref"),
                     sensitive=("receipt",))(_pay)
    assert (pay.redact, pay.sensitive) == (("iban", "ref"), ("receipt",))
    assert list(agent.tools) == ["pay"]


def test_a_tools_sensitive_given_as_one_string_is_refused():
    _, agent = _agent()
    with pytest.raises(DefinitionError, match=r"sensitive names fields: write "
                                              r"sensitive=\('receipt',\)"):
        agent.tool("pay", kind=WRITE, args=PayArgs, sensitive="receipt")(_pay)
    assert agent.tools == {}


def test_a_decision_declaring_sensitive_a_field_its_schema_does_not_have_is_refused():
    workflow = Workflow("test-redact-mistakes", version=1, input=OrderIn, register=False)
    with pytest.raises(DefinitionError) as refused:
        workflow.decision("classify", schema=Verdict, sensitive=("IBAN",))(lambda ctx: {})
    assert str(refused.value) == (
        "workflow test-redact-mistakes v1, step 'classify': sensitive names 'IBAN', which "
        "its result Verdict does not have (its fields: category, iban)")
    assert workflow.steps == []
    workflow.decision("classify", schema=Verdict, sensitive=("iban",))(lambda ctx: {})
    assert [s.sensitive for s in workflow.steps] == [("iban",)]
