"""The OpenAPI document says exactly what a start request may carry, and what any body
sent as another media type gets.

Ninja derives the document from StartRunIn, where `input` is any object: the real shape
depends on the workflow. Here the request body becomes one alternative per registered
workflow (its latest version): `workflow` fixed to its name and `input` the workflow's own
pydantic input schema. The runtime validation is the same (api.routes validates the input
strictly against that schema), so a client generated from the document sends what the API
accepts.
"""

import re

from runs.definitions.definition import registry
from runs.machine.storable import NUL_PROBLEM, text_problem

NO_NUL_PATTERN = r"^[^\u0000]*$"


def _component(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def _forbid_nul(node) -> None:
    """Strings stored in PostgreSQL cannot hold NUL: say so on every free-text string."""
    if isinstance(node, dict):
        if (node.get("type") == "string" and not {"pattern", "format", "enum", "const"}
                & node.keys()):
            node["pattern"] = NO_NUL_PATTERN
        for value in node.values():
            _forbid_nul(value)
    elif isinstance(node, list):
        for value in node:
            _forbid_nul(value)


def exact_start_body(schema: dict, *, operation_id: str) -> None:
    """Replace the start operation's request body with one alternative per workflow."""
    names = registry.names()
    operation = next((op for methods in schema.get("paths", {}).values()
                      for op in methods.values()
                      if isinstance(op, dict) and op.get("operationId") == operation_id), None)
    if operation is None or not names:
        return
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    generic = components.get("StartRunIn", {}).get("properties", {})
    alternatives, mapping = [], {}
    for name in names:
        definition = registry.latest(name)
        prefix = _component(name)
        input_schema = definition.input_schema.model_json_schema(
            ref_template=f"#/components/schemas/{prefix}.{{model}}")
        for model, sub in input_schema.pop("$defs", {}).items():
            _forbid_nul(sub)
            components[f"{prefix}.{model}"] = sub
        _forbid_nul(input_schema)
        input_schema["description"] = f"The input of {name} v{definition.version}."
        components[f"{prefix}.input"] = input_schema
        required = ["workflow", "business_key"] + (["input"] if input_schema.get("required")
                                                   else [])
        components[f"{prefix}.start"] = {
            "title": f"Start {name}",
            "type": "object",
            "properties": {
                "workflow": {"type": "string", "const": name},
                "business_key": generic.get("business_key", {"type": "string"}),
                "input": {"$ref": f"#/components/schemas/{prefix}.input"},
            },
            "required": required,
            # As StartRunIn: a field the start does not take is refused (422), never dropped.
            "additionalProperties": False,
        }
        ref = f"#/components/schemas/{prefix}.start"
        alternatives.append({"$ref": ref})
        mapping[name] = ref
    content = operation["requestBody"]["content"]["application/json"]
    content["schema"] = {"oneOf": alternatives,
                         "discriminator": {"propertyName": "workflow", "mapping": mapping}}
    components.pop("StartRunIn", None)
    _link_to_state(operation)


def declare_unsupported_media_type(schema: dict) -> None:
    """Every operation that takes a body answers 415 to one sent as anything but JSON
    (api.parser): say so in each, as the document says every other answer."""
    for methods in schema.get("paths", {}).values():
        for operation in methods.values():
            if isinstance(operation, dict) and "requestBody" in operation:
                # An integer key, like ninja's own (a string one would be a second "415").
                operation.setdefault("responses", {})[415] = {
                    "description": "The body was not sent as application/json.",
                    "content": {"application/json": {
                        "schema": {"$ref": "#/components/schemas/Error"}}}}


def _link_to_state(operation: dict) -> None:
    """OpenAPI links: the run a start answers with is followed with get_run (clients and
    schemathesis' stateful tests use them)."""
    for status, pointer in (("201", "/id"), ("200", "/id"), ("409", "/existing_run/id")):
        response = operation.get("responses", {}).get(status)
        if response is not None:
            response["links"] = {"GetRun": {
                "operationId": "get_run", "parameters": {"run_id": f"$response.body#{pointer}"},
                "description": "The state of the run."}}


def unstorable(value, loc: list) -> list[dict]:
    """Field errors for strings the database cannot store (NUL characters, lone surrogates),
    in keys or values anywhere in `value`."""
    errors: list[dict] = []
    if isinstance(value, dict):
        for key, item in value.items():
            errors += _bad_text(key, [*loc, key]) + unstorable(item, [*loc, key])
    elif isinstance(value, list):
        for i, item in enumerate(value):
            errors += unstorable(item, [*loc, i])
    elif isinstance(value, str):
        errors += _bad_text(value, loc)
    return errors


def _bad_text(text, loc: list) -> list[dict]:
    problem = text_problem(text) if isinstance(text, str) else None
    if problem is None:
        return []
    kind = "string_nul" if problem == NUL_PROBLEM else "string_unicode"
    return [{"loc": loc, "msg": problem, "type": kind}]
