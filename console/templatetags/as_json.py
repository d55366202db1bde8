"""{{ value|as_json }}: an audit record's before and after (JSON in the database) shown as
JSON, the form the export and the API use, not as Python's repr; a sealed value in it as the
mask, as every page shows one (audit.redaction.sealed_masked)."""

import json

from django import template

from audit.redaction import sealed_masked

register = template.Library()


@register.filter
def as_json(value) -> str:
    """A string stays as it is; anything else (dict, list, number, None) is JSON."""
    value = sealed_masked(value)
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
