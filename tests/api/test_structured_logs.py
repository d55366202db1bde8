"""Structured logs: JSON lines carrying the run they are about, with secrets masked; the API
and Celery tasks bind the run's fields without any call site passing them."""

import io
import json
import logging

import pytest
from celery import signals

from observability.logs import ContextFilter, JsonFormatter, current, log_context
from runs.tasks import advance_run as advance_run_task
from tests.api.conftest import post_run
from tests.test_settings import PRODUCTION_ENV


@pytest.fixture
def json_lines():
    """A handler set up as settings.LOGGING sets up the console handler with LOG_FORMAT=json;
    returns a function giving the lines written so far, parsed."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(ContextFilter())
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    root.removeHandler(handler)
    root.setLevel(old_level)


def test_a_line_carries_the_bound_run_context_and_masks_secrets(json_lines):
    log = logging.getLogger("runs.anything")
    with log_context(run_id=42, workflow="test-orders", business_key="tenant-1:o-9"):
        with log_context(step="create-task", idempotency_key="ab" * 32):
            log.warning("calling with Authorization: Bearer sk-live-abcdefghijkl")
        log.info("between steps")
    log.info("outside")
    first, second, third = json_lines()
    assert first["run_id"] == 42 and first["step"] == "create-task"
    assert first["business_key"] == "tenant-1:o-9" and first["idempotency_key"] == "ab" * 32
    assert "sk-live" not in first["message"] and "[redacted]" in first["message"]
    assert first["level"] == "WARNING" and first["logger"] == "runs.anything"
    assert first["time"].endswith("Z")
    assert second["run_id"] == 42 and "step" not in second
    assert "run_id" not in third and current() == {}


def test_exceptions_are_one_json_field_and_redacted(json_lines):
    try:
        raise RuntimeError("token=hunter2 refused")
    except RuntimeError:
        logging.getLogger("x").exception("boom")
    (line,) = json_lines()
    assert "RuntimeError" in line["exception"] and "hunter2" not in line["exception"]


def test_an_api_start_logs_with_the_run_and_the_token(json_lines, api_client):
    response = post_run(api_client, {"workflow": "test-orders", "business_key": "tenant-1:k",
                                     "input": {"order": "o"}})
    lines = [line for line in json_lines() if line["logger"] == "api.access"]
    started = next(line for line in lines if line["message"].startswith("run "))
    assert started["run_id"] == response.json()["id"]
    assert started["business_key"] == "tenant-1:k" and started["workflow"] == "test-orders"
    assert started["actor"] == "api-token:erp"
    access = lines[-1]
    assert access["message"] == "POST /api/runs 201" and access["actor"] == "api-token:erp"
    assert current() == {}


def test_a_celery_task_logs_with_the_run_it_advances(json_lines):
    signals.task_prerun.send(sender=advance_run_task, task_id="t-1", task=advance_run_task,
                             args=(7,), kwargs={})
    logging.getLogger("runs.execution.executor").info("inside the task")
    signals.task_postrun.send(sender=advance_run_task, task_id="t-1", task=advance_run_task,
                              args=(7,), kwargs={}, retval=None, state="SUCCESS")
    logging.getLogger("runs.execution.executor").info("after the task")
    inside, after = json_lines()
    assert (inside["run_id"], inside["task_id"]) == (7, "t-1")
    assert "run_id" not in after


def test_unknown_context_fields_are_refused():
    with pytest.raises(ValueError, match="password"), log_context(password="x"):
        pass


def test_production_logs_are_json(tmp_path):
    import os
    import subprocess
    import sys

    code = ("import django, logging; django.setup(); "
            "logging.getLogger('runs').warning('hello')")
    result = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "console.production", **PRODUCTION_ENV,
             "SECRET_KEY": "k" * 64, "VAR_DIR": str(tmp_path)},
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    line = json.loads(result.stderr.strip().splitlines()[-1])
    assert line["message"] == "hello" and line["level"] == "WARNING"
