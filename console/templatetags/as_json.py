"""{{ value|as_json }}: an audit record's before and after (JSON in the database) shown as
JSON, the form the export and the API use, not as Python's repr."""

import json

from django import template

register = template.Library()


@register.filter
def as_json(value) -> str:
    """A string stays as it is; anything else (dict, list, number, None) is JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
