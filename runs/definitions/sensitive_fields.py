"""The fields a step or an agent's tool declares sensitive, checked against its schema when
it is declared: a name the schema does not have seals and masks nothing, so a misspelt one
(redact=("ibna",)) left the field it meant in clear in every row, record, page and archive,
and said nothing. runs.definitions.validation asks this for each tool and step."""


def schema_fields(model) -> tuple[str, ...]:
    """The names a value of `model` carries its fields under: each field's name, and its
    alias where it has one (a model's tool call sends the JSON Schema's names)."""
    names: list[str] = []
    for name, info in model.model_fields.items():
        names += [name] if info.alias in (None, name) else [name, info.alias]
    return tuple(names)


def unknown_fields_problem(option: str, declared, model, *, held: str,
                           hint: str = "") -> str | None:
    """Why `declared` (the `option` of a declaration, a tuple of names) names a field that
    `model` (`held`: what the model is, e.g. "its args") does not have, or None. A string or
    a model that is no model is left to the checks that name those mistakes."""
    if isinstance(declared, str) or not isinstance(getattr(model, "model_fields", None), dict):
        return None
    unknown = [name for name in declared if name not in schema_fields(model)]
    if not unknown:
        return None
    fields = ", ".join(name if info.alias in (None, name) else f"{name} (or {info.alias})"
                       for name, info in model.model_fields.items())
    return (f"{option} names {', '.join(map(repr, unknown))}, which {held} "
            f"{model.__name__} does not have (its fields: {fields or 'none'}){hint}")
