"""The openai client that agent and decision steps ask the model through sends its requests
with httpx2, which logs each one's URL at INFO under its own logger names: they are held at
HTTP_CLIENT_LOG_LEVEL as httpx's are, so a model call's URL, query string included, is not
written into every worker's log; the library's warnings still show."""

import logging

import httpx2

from tests.receiver import ScriptedReceiver


def test_the_model_clients_http_library_logs_no_request_url_and_still_logs_its_warnings(caplog):
    with ScriptedReceiver() as receiver, caplog.at_level(logging.INFO):
        httpx2.get(f"{receiver.url}/tasks?api-version=s3cret-value").raise_for_status()
        logging.getLogger("httpx2").warning("a warning of the model's HTTP client")

    assert "s3cret-value" not in caplog.text
    assert "a warning of the model's HTTP client" in caplog.text
