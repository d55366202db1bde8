"""A workflow's input and an agent tool's args are published as JSON Schema: the input in the
API's OpenAPI document (and a start over the API is read against it), a tool's args to the
model with every turn. A model pydantic cannot describe (a Callable field, an arbitrary
class, a forward reference left unresolved) was accepted when declared; then
GET /api/openapi.json answered 500 for every caller, whatever their workflows, and each of
the agent's model turns failed. Now the declaration fails when its module is imported,
naming the workflow (and step and tool) and the field pydantic cannot describe."""

from collections.abc import Callable

import pytest
from django.urls import reverse
from pydantic import BaseModel, ConfigDict

from runs.definitions.definition import READ, Workflow, registry
from runs.definitions.validation import DefinitionError


class Thing:
    pass


class WithCallable(BaseModel):
    name: str
    on_done: Callable[[int], None] | None = None


class WithArbitraryClass(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    thing: Thing


class WithForwardReference(BaseModel):
    later: "NeverDefined"  # noqa: F821


class Plain(BaseModel):
    name: str


@pytest.fixture(autouse=True)
def _nothing_left_registered():
    yield
    # Without the refusal the workflow would stay registered for the process's other tests.
    for version in registry.versions("test-undescribable-input"):
        registry.unregister(version)


SCHEMAS = [(WithCallable, "CallableSchema"), (WithArbitraryClass, "IsInstanceSchema"),
           (WithForwardReference, "is not fully defined")]


@pytest.mark.parametrize("schema, why", SCHEMAS)
def test_an_input_with_no_json_schema_is_refused_and_not_registered(schema, why):
    with pytest.raises(DefinitionError) as refused:
        Workflow("test-undescribable-input", version=1, input=schema)
    message = str(refused.value)
    assert message.startswith("workflow test-undescribable-input v1: its input has no JSON "
                              "Schema, which the API publishes")
    assert why in message
    assert registry.get("test-undescribable-input", 1) is None


@pytest.mark.parametrize("schema, why", SCHEMAS)
def test_a_tools_args_with_no_json_schema_are_refused_naming_the_tool(schema, why):
    agent = Workflow("test-undescribable-args", version=1, input=Plain,
                     register=False).agent("triage", system_prompt="Triage it.")
    with pytest.raises(DefinitionError) as refused:
        agent.tool("look-up", kind=READ, args=schema)(lambda ctx, args: {})
    message = str(refused.value)
    assert message.startswith("workflow test-undescribable-args v1, step 'triage', tool "
                              "'look-up': its args class has no JSON Schema, which the model "
                              "is sent")
    assert why in message
    assert agent.tools == {}


@pytest.mark.django_db
def test_the_openapi_document_is_served_with_every_registered_workflow(client):
    with pytest.raises(DefinitionError):
        Workflow("test-undescribable-input", version=1, input=WithCallable)
    response = client.get(reverse("api:openapi-json"))
    assert response.status_code == 200
    assert "test-undescribable-input" not in response.content.decode()
