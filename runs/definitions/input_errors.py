"""How a workflow's input that its schema refused is told: each error's location in the
schema's own field names and list positions (a key the input chose is shown as [key], never
its text: it may be anything the sender wrote), and the errors as one line."""

import typing

from pydantic import BaseModel


def input_errors_text(errors: list[dict]) -> str:
    """parse_input's errors as one line: `field.sub: why; ...`."""
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'input'}: {e['msg']}" for e in errors)


def shown_location(schema: type[BaseModel], loc) -> list:
    """`loc` with the schema's field names and list positions, any other part (a dict key
    the input chose) as [key]."""
    shown, model = [], schema
    for part in loc:
        fields = model.model_fields if isinstance(model, type) and issubclass(
            model, BaseModel) else {}
        if isinstance(part, int):
            shown.append(part)
        elif part in fields:
            shown.append(part)
            model = model_within(fields[part].annotation)
        else:
            shown.append("[key]")
    return shown


def model_within(annotation) -> type[BaseModel] | None:
    """The model a field holds, directly or as the items of a list or dict (or a union)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = model_within(arg)
        if found is not None:
            return found
    return None
