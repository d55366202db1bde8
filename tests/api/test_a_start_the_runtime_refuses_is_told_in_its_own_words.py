"""A start the runtime refuses (runs.machine.transitions.start.start_run) is told as the
runtime says it, as the CLI's start_run says it: a business key of spaces only is no "input
for ... does not match its schema: business_key: required", and an input over
RUNS_INPUT_MAX_BYTES, which matches its schema, is told with its size, the limit and the
setting, not as "input: too large" under "does not match its schema". Nothing is written."""

import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from runs.models import Run
from tests.api.conftest import post_run

pytestmark = pytest.mark.django_db


def _cli_refusal(business_key, data) -> str:
    with pytest.raises(CommandError) as refused:
        call_command("start_run", "test-orders", business_key, "--input", json.dumps(data))
    return str(refused.value)


def test_a_business_key_of_spaces_is_told_as_a_blank_key_not_a_schema_mismatch(api_client):
    data = {"order": "o-1", "amount": 5}
    response = post_run(api_client, {"workflow": "test-orders", "business_key": "   ",
                                     "input": data})

    assert response.status_code == 422, response.content
    answer = response.json()
    assert answer["error"] == "invalid_input"
    assert answer["detail"] == "business key must be a non-empty string, not only spaces"
    assert "does not match its schema" not in answer["detail"]
    assert [e["loc"] for e in answer["errors"]] == [["business_key"]]
    assert answer["detail"] in _cli_refusal("   ", data)
    assert Run.objects.count() == 0


@pytest.mark.parametrize("business_key", ["tenant-42:P5-1 ", " tenant-42:P5-1",
                                          "tenant-42:P5-1\u00a0"])
def test_a_business_key_with_a_space_at_an_end_starts_no_second_run_of_the_same_key(
        api_client, business_key):
    data = {"order": "o-1", "amount": 5}
    assert post_run(api_client, {"workflow": "test-orders", "business_key": "tenant-42:P5-1",
                                 "input": data}).status_code == 201
    response = post_run(api_client, {"workflow": "test-orders", "business_key": business_key,
                                     "input": data})

    assert response.status_code == 422, response.content
    answer = response.json()
    assert answer["detail"] == ("business key must not begin or end with spaces: "
                                f"{business_key!r}")
    assert [e["loc"] for e in answer["errors"]] == [["business_key"]]
    assert answer["detail"] in _cli_refusal(business_key, data)
    assert list(Run.objects.values_list("business_key", flat=True)) == ["tenant-42:P5-1"]


def test_a_business_key_with_its_accents_written_apart_starts_no_second_run(api_client):
    data = {"order": "o-1", "amount": 5}
    composed, apart = "tenant-42:caf\u00e9", "tenant-42:cafe\u0301"  # both read "café"
    assert post_run(api_client, {"workflow": "test-orders", "business_key": composed,
                                 "input": data}).status_code == 201
    response = post_run(api_client, {"workflow": "test-orders", "business_key": apart,
                                     "input": data})

    assert response.status_code == 422, response.content
    answer = response.json()
    assert answer["detail"].startswith("business key must be in Unicode's composed form (NFC")
    assert [e["loc"] for e in answer["errors"]] == [["business_key"]]
    assert answer["detail"] in _cli_refusal(apart, data)
    assert list(Run.objects.values_list("business_key", flat=True)) == [composed]


def test_an_input_over_its_size_limit_names_its_size_and_the_limit(api_client, settings):
    settings.RUNS_INPUT_MAX_BYTES = 1000
    data = {"order": "x" * 2000, "amount": 5}
    response = post_run(api_client, {"workflow": "test-orders", "business_key": "big-1",
                                     "input": data})

    assert response.status_code == 422, response.content
    answer = response.json()
    assert "does not match its schema" not in answer["detail"]
    assert answer["detail"].startswith("input for test-orders is 2,")
    assert "over the limit of 1,000 bytes (RUNS_INPUT_MAX_BYTES)" in answer["detail"]
    assert [e["loc"] for e in answer["errors"]] == [["input"]]
    assert answer["detail"] in _cli_refusal("big-1", data)
    assert Run.objects.count() == 0


def test_a_field_the_schema_refuses_is_still_told_as_a_schema_mismatch(api_client):
    response = post_run(api_client, {"workflow": "test-orders", "business_key": "bad-1",
                                     "input": {"order": "o-1", "amount": "many"}})

    assert response.status_code == 422
    assert response.json()["detail"].startswith(
        "input for test-orders does not match its schema: input.amount:")
