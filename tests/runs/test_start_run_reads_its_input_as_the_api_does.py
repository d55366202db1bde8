"""`manage.py start_run` reads --input as POST /api/runs reads a start's input: JSON's types
as the workflow's schema declares them. "5" for an integer field was taken by the command
(the runtime's own coercion) and refused 422 by the API, so a script and an integrator were
told different things of the same input. Now the command refuses it naming the field, and
starts nothing; an input the API takes, the command takes."""

import io
import json

import pytest
from django.core.management import CommandError, call_command

from api.tokens import token_create
from runs.models import Run
from tests.api.conftest import post_run

pytestmark = pytest.mark.django_db


def _start(key: str, value: dict) -> str:
    out = io.StringIO()
    call_command("start_run", "test-orders", key, "--input", json.dumps(value), stdout=out)
    return out.getvalue()


@pytest.mark.parametrize(("value", "named"), [
    ({"order": "o-1", "amount": "5"}, "amount: Input should be a valid integer"),
    ({"order": 7, "amount": 5}, "order: Input should be a valid string"),
    ({"amount": 5}, "order: Field required"),
])
def test_an_input_the_api_refuses_the_command_refuses_naming_the_field(client, value, named):
    _, plaintext = token_create(name="erp", workflows=["test-orders"])
    refused = post_run(client, {"workflow": "test-orders", "business_key": "k-api",
                                "input": value}, HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    assert refused.status_code == 422
    with pytest.raises(CommandError) as failed:
        _start("k-cli", value)
    message = str(failed.value)
    assert message.startswith("--input for test-orders does not match its schema: ")
    assert named in message and message.endswith("nothing was started")
    assert not Run.objects.exists()


def test_an_input_the_api_takes_the_command_takes():
    assert _start("k-1", {"order": "o-1", "amount": 5}).startswith("started run ")
    assert Run.objects.filter(business_key="k-1").count() == 1
