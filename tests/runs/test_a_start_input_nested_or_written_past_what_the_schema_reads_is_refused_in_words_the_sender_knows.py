"""A start's input the strict schema check cannot read, though it is valid JSON, is refused
in words about the input itself, by the API and by `manage.py start_run` alike: objects and
lists nested deeper than the schema's reader goes (a few hundred levels, below the depth
the body reader refuses) were answered "Invalid JSON: recursion limit exceeded at line 1
column 221", and the command answered a lone surrogate with "Invalid JSON: unexpected end of
hex escape", both about a text the workflow writes for itself and nobody sent. Nothing is
started."""

import io
import json

import pytest
from django.core.management import CommandError, call_command

from api.tokens import token_create
from audit.models import AuditRecord
from runs.models import Run
from tests.api.conftest import post_run

pytestmark = pytest.mark.django_db

NESTED = {"order": "o-1", "notes": json.loads("[" * 300 + "]" * 300)}


def _command(key: str, text: str) -> str:
    with pytest.raises(CommandError) as refused:
        call_command("start_run", "test-orders", key, "--input", text, stdout=io.StringIO())
    return str(refused.value)


def test_an_input_nested_too_deeply_is_refused_saying_so_by_the_api_and_the_command(client):
    _, plaintext = token_create(name="erp", workflows=["test-orders"])
    before = (Run.objects.count(), AuditRecord.objects.count())
    answer = post_run(client, {"workflow": "test-orders", "business_key": "k-api",
                               "input": NESTED}, HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    assert answer.status_code == 422, answer.content
    body = answer.json()
    assert body["error"] == "invalid_input"
    assert [(e["loc"], e["type"]) for e in body["errors"]] == [(["input"], "too_deep")]
    assert "nested too deeply" in body["detail"] and "JSON" not in body["detail"]
    said = _command("k-cli", json.dumps(NESTED))
    assert "nested too deeply" in said and "JSON" not in said, said
    assert said.endswith("nothing was started")
    assert (Run.objects.count(), AuditRecord.objects.count()) == before


def test_the_command_names_where_an_input_holds_text_that_is_not_unicode():
    said = _command("k-cli", '{"order": "o-1", "lines": [{"sku": "\\udc00"}]}')
    assert "lines.0.sku: not valid Unicode text (a lone surrogate)" in said, said
    assert "JSON" not in said
    assert not Run.objects.exists()
