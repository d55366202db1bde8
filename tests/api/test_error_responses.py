"""Every error the API answers is JSON, with DEBUG off or on, and never carries a traceback:
an oversized body is 413 naming the limit, an unknown path 404, a wrong method 405 and an
unhandled error 500."""

import json

import pytest
from django.conf import settings as django_settings

from tests.api.conftest import post_run

pytestmark = pytest.mark.django_db

FIVE_MB = 5 * 1024 * 1024


def _assert_json_without_traceback(response, status: int) -> dict:
    assert response.status_code == status, response.content[:500]
    assert response["Content-Type"].startswith("application/json")
    assert b"Traceback" not in response.content
    return json.loads(response.content)


@pytest.mark.parametrize("debug", [False, True])
def test_a_5mb_body_to_start_run_is_413_json_naming_the_limit(api_client, settings, debug):
    settings.DEBUG = debug
    body = '{"workflow": "test-orders", "business_key": "k", "input": {"pad": "%s"}}' % (
        "x" * FIVE_MB)
    response = api_client.post("/api/runs", body, content_type="application/json")
    error = _assert_json_without_traceback(response, 413)
    assert error["error"] == "request_too_large"
    assert str(django_settings.DATA_UPLOAD_MAX_MEMORY_SIZE) in error["detail"]


@pytest.mark.parametrize("debug", [False, True])
def test_an_unknown_api_path_is_404_json(api_client, settings, debug):
    settings.DEBUG = debug
    error = _assert_json_without_traceback(api_client.get("/api/no-such-thing"), 404)
    assert error["error"] == "not_found"


def test_a_method_an_operation_does_not_take_is_405_json_with_allow(api_client):
    response = api_client.delete("/api/runs")
    error = _assert_json_without_traceback(response, 405)
    assert error["error"] == "method_not_allowed" and "POST" in response["Allow"]


@pytest.mark.parametrize("debug", [False, True])
def test_an_unhandled_error_is_500_json_without_its_message(api_client, settings, monkeypatch,
                                                            debug):
    settings.DEBUG = debug
    run_id = post_run(api_client, {"workflow": "test-orders", "business_key": "k-1",
                                   "input": {"order": "o-1"}}).json()["id"]

    def broken(*args, **kwargs):
        raise RuntimeError("secret internals of the failure")

    monkeypatch.setattr("api.routes.selectors.run_view", broken)
    response = api_client.get(f"/api/runs/{run_id}")
    error = _assert_json_without_traceback(response, 500)
    assert error["error"] == "server_error"
    assert b"secret internals" not in response.content
