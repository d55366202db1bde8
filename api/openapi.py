"""The OpenAPI document says exactly what a start request may carry, and what any body
sent as another media type gets.

Ninja derives the document from StartRunIn, where `input` is any object: the real shape
depends on the workflow. Here the request body becomes one alternative per registered
workflow (its latest version): `workflow` fixed to its name and `input` the workflow's own
pydantic input schema. The runtime validation is the same (api.routes validates the input
strictly against that schema), so a client generated from the document sends what the API
accepts.

The document also says what the API sends: the progress events POSTed to subscribers
(`webhooks`, OpenAPI 3.1), their bodies derived from the models api.webhooks builds them with.
"""

import re

from runs.definitions.definition import registry

from .schemas import RunStatusChanged, RunStepCompleted

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


# The answers every operation that takes a body may give before its body is read: 413 to
# one over DATA_UPLOAD_MAX_MEMORY_SIZE (api.routes), 415 to one not sent as JSON (api.parser).
BODY_ANSWERS = {
    413: "The body is larger than the limit (DATA_UPLOAD_MAX_MEMORY_SIZE); nothing was read "
         "or done (`request_too_large`).",
    415: "The body was not sent as application/json.",
}

# The answer any operation gives when the database does not answer, or refuses changes
# (read-only: a standby, a DBA's setting) (api.routes).
UNAVAILABLE = (503, "The database did not answer (`database_unavailable`), or refused the "
                    "change because it is read-only (`database_read_only`); nothing was done: "
                    "try again after `Retry-After` seconds. "
                    "Where the connection was lost as the change was committed, `detail` "
                    "says what the database answered afterwards: not done (try again), or "
                    "that it may have been done (read it back first); or, as "
                    "`done_answer_lost` without `Retry-After`, that it was done: read it "
                    "back, do not send it again.")


def declare_common_answers(schema: dict) -> None:
    """Say in each operation the answers it may give that its own declaration does not name
    (BODY_ANSWERS where it takes a body, UNAVAILABLE everywhere), as the document says every
    other answer: a client generated from it, or a contract test, would otherwise meet an
    answer it was never told of."""
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    retry_after = {"Retry-After": {"description": "Seconds to wait before trying again.",
                                   "schema": {"type": "integer"}}}
    for methods in schema.get("paths", {}).values():
        for operation in methods.values():
            if not isinstance(operation, dict):
                continue
            # Integer keys, like ninja's own (a string one would be a second).
            responses = operation.setdefault("responses", {})
            if "requestBody" in operation:
                for status, description in BODY_ANSWERS.items():
                    responses[status] = {"description": description, "content": error}
            status, description = UNAVAILABLE
            responses[status] = {"description": description, "content": error,
                                 "headers": retry_after}


def _link_to_state(operation: dict) -> None:
    """OpenAPI links: the run a start answers with is followed with get_run (clients and
    schemathesis' stateful tests use them)."""
    for status, pointer in (("201", "/id"), ("200", "/id"), ("409", "/existing_run/id")):
        response = operation.get("responses", {}).get(status)
        if response is not None:
            response["links"] = {"GetRun": {
                "operationId": "get_run", "parameters": {"run_id": f"$response.body#{pointer}"},
                "description": "The state of the run."}}


# The headers of every delivery (api.webhooks._attempt), as a receiver checks them.
_WEBHOOK_HEADERS = {
    "X-Webhook-Id": {
        "description": "The delivery id, the same on every attempt (and the body's "
                       "`delivery_id`): a receiver drops a delivery it has had.",
        "required": True, "schema": {"type": "string", "format": "uuid"}},
    "X-Webhook-Timestamp": {
        "description": "When this attempt was sent, in whole seconds since the Unix epoch; "
                       "each attempt is signed anew. Refuse one far from your clock (say "
                       "more than 300 s).",
        "required": True, "schema": {"type": "string", "pattern": r"^[0-9]+$"}},
    "X-Webhook-Signature": {
        "description": "`sha256=` and the lower-case hex HMAC-SHA256, keyed with the "
                       "subscriber's secret (UTF-8), of `<X-Webhook-Timestamp>.<body>`, the "
                       "body being the bytes received: verify before parsing, and compare "
                       "in constant time. For a while after the secret is replaced "
                       "(WEBHOOK_SECRET_OVERLAP_HOURS) one signature per secret, "
                       "comma-separated, the new secret's first: split on the commas and "
                       "accept the delivery when any of them is yours.",
        "required": True, "schema": {"type": "string",
                                     "pattern": r"^sha256=[0-9a-f]{64}(,sha256=[0-9a-f]{64})*$"}},
}
# api.webhooks._attempt: any 2xx delivers, anything else (or no answer) is tried again.
_WEBHOOK_RESPONSES = {
    "2XX": {"description": "Delivered: any 2xx. The answer's body is not read."},
    "default": {"description": "Any other answer (3xx, 4xx, 5xx alike; redirects are not "
                               "followed), or none within WEBHOOK_TIMEOUT_SECONDS: tried "
                               "again after 2, 4, 8 ... 512 s, failed after the 10th attempt."},
}
WEBHOOKS = {
    "runStatusChanged": (RunStatusChanged, "A run's status changed"),
    "runStepCompleted": (RunStepCompleted, "A step of a run has an outcome"),
}


def declare_webhooks(schema: dict) -> None:
    """The progress events a subscriber receives, as OpenAPI 3.1 `webhooks`: the body of
    each from the model the publisher builds it with, the signed headers, the answers."""
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    hooks = {}
    for name, (model, summary) in WEBHOOKS.items():
        body = model.model_json_schema(by_alias=True, mode="serialization",
                                       ref_template="#/components/schemas/{model}")
        components.update(body.pop("$defs", {}))
        components[model.__name__] = body
        hooks[name] = {"post": {
            "operationId": name,
            "summary": summary,
            "description": "POSTed as JSON to each subscriber that takes the run's workflow "
                           "(docs/operations.md, Progress events).",
            "parameters": [{"name": header, "in": "header", **spec}
                           for header, spec in _WEBHOOK_HEADERS.items()],
            "requestBody": {"required": True, "content": {"application/json": {
                "schema": {"$ref": f"#/components/schemas/{model.__name__}"}}}},
            "responses": {code: dict(answer) for code, answer in _WEBHOOK_RESPONSES.items()},
        }}
    schema["webhooks"] = hooks
