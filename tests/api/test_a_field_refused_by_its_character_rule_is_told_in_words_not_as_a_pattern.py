"""A body field refused by the API's character rules (no control characters in a business
key, no NUL in text the database stores) is told in words: "contains control characters
(line breaks, tabs, ...)", "contains a NUL character", as the CLI and the runtime say it,
not "String should match pattern '^[^\\u0000-\\u001f...]+$'", which names a character class
instead of what is wrong. The error's type stays string_pattern_mismatch; nothing is
written."""

import pytest

from runs.models import ExternalEvent, Run
from tests.api.conftest import post_run

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("business_key", ["tenant-1\norder-7", "a\tb", "a\u2028b", "a\u202eb"])
def test_a_business_key_with_a_control_character_is_refused_in_words(api_client, business_key):
    response = post_run(api_client, {"workflow": "test-orders", "business_key": business_key,
                                     "input": {"order": "o-1"}})

    assert response.status_code == 422, response.content
    [error] = response.json()["errors"]
    assert error["loc"] == ["business_key"]
    assert error["msg"].startswith("contains control characters (line breaks, tabs")
    assert "pattern" not in error["msg"] and "\\u" not in error["msg"]
    assert error["type"] == "string_pattern_mismatch"
    assert Run.objects.count() == 0


@pytest.mark.parametrize("field", ["workflow", "event", "event_id", "correlation_key"])
def test_a_nul_in_an_events_text_is_refused_in_words(api_client, field):
    event = {"workflow": "test-orders", "event": "payment.settled", "event_id": "e-1",
             "correlation_key": "k-1", "payload": {}}
    event[field] = "a\x00b"
    response = api_client.post("/api/events", event, content_type="application/json")

    assert response.status_code == 422, response.content
    [error] = response.json()["errors"]
    assert error["loc"] == [field]
    assert error["msg"] == "contains a NUL character, which cannot be stored"
    assert not ExternalEvent.objects.exists()


def test_any_other_refusal_keeps_its_own_message(api_client):
    response = post_run(api_client, {"workflow": "test-orders", "business_key": "",
                                     "input": {"order": "o-1"}})

    assert response.status_code == 422
    assert response.json()["errors"][0]["msg"] == "String should have at least 1 character"
