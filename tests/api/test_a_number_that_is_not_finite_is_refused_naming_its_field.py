"""A JSON number that is not finite is refused with 422 naming where it is, by the one rule
of the API's body parser (api.parser): NaN and Infinity (not JSON at all) and a literal too
large for a float, which Python reads as infinity (1e400, -1e400), whether in a field the
workflow declares or in one its schema would drop. Nothing is started."""

import json

import pytest

from audit.models import AuditRecord
from runs.models import Run, Step
from tests.api.conftest import post_run

pytestmark = pytest.mark.django_db


def _rows():
    return Run.objects.count(), Step.objects.count(), AuditRecord.objects.count()


def _start(input_json: str) -> str:
    return ('{"workflow": "test-orders", "business_key": "tenant-1:order-1", '
            f'"input": {input_json}}}')


@pytest.mark.parametrize("number", ["1e400", "-1e400", "1.5E+309", "Infinity", "-Infinity",
                                    "NaN"])
@pytest.mark.parametrize(("input_json", "loc"), [
    ('{"order": "o-1", "amount": %s}', ["input", "amount"]),
    # Not declared by the workflow's input schema, which would drop it unread.
    ('{"order": "o-1", "note": %s}', ["input", "note"]),
    ('{"order": "o-1", "extras": [1, {"x": %s}]}', ["input", "extras", 1, "x"]),
])
def test_a_number_that_is_not_finite_is_422_naming_its_field(api_client, number, input_json,
                                                             loc):
    before = _rows()
    response = post_run(api_client, _start(input_json % number))
    assert response.status_code == 422, response.content
    answer = response.json()
    assert answer["error"] == "invalid_request"
    assert answer["errors"] == [{"loc": loc, "msg": "Input should be a finite number",
                                 "type": "finite_number"}]
    assert ".".join(map(str, loc)) in answer["detail"]
    assert _rows() == before


def test_every_number_that_is_not_finite_is_named(api_client):
    before = _rows()
    response = post_run(api_client, _start('{"order": "o-1", "a": 1e400, "b": 2.5, '
                                           '"c": [-1e999, 7]}'))
    assert response.status_code == 422, response.content
    assert [e["loc"] for e in response.json()["errors"]] == [["input", "a"],
                                                             ["input", "c", 0]]
    assert _rows() == before


def test_a_body_that_is_only_a_number_that_is_not_finite_names_the_body(api_client):
    before = _rows()
    response = post_run(api_client, "1e400")
    assert response.status_code == 422, response.content
    assert [e["loc"] for e in response.json()["errors"]] == [["body"]]
    assert _rows() == before


def test_the_largest_finite_numbers_are_not_refused_by_the_rule(api_client):
    body = json.loads(_start('{"order": "o-1", "note": 1.7976931348623157e308, '
                             '"tiny": -1e-400}'))
    response = post_run(api_client, json.dumps(body))
    assert response.status_code == 201, response.content
    assert Run.objects.count() == 1
