"""LOG_FORMAT=plain (the development default, and a deployment's choice) masks what the
JSON lines mask: a bearer token, a password=..., an approval link's token, in a message or
in its traceback, whichever logger wrote it. Workers in a deployment log through the same
handler, not Celery's own formatter."""

import logging
import os
import subprocess
import sys

from observability.logs import PlainFormatter
from tests.test_settings import PRODUCTION_ENV

SECRETS = ("abc.DEF-123", "hunter2", "s3cr3t-link-token")
CODE = """
import django, logging
django.setup()
log = logging.getLogger("runs")
log.warning("remote said 401 to Authorization: Bearer abc.DEF-123")
try:
    raise RuntimeError("connect failed: password=hunter2")
except RuntimeError:
    log.exception("call failed")
logging.getLogger("approvals").warning("Gone: /approvals/5/link/s3cr3t-link-token/")
"""


def _run(code: str, settings_module: str, tmp_path) -> subprocess.CompletedProcess:
    extra = {**PRODUCTION_ENV, "SECRET_KEY": "k" * 64} if settings_module.endswith(
        "production") else {}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": settings_module, **extra,
             "VAR_DIR": str(tmp_path), "LOG_FORMAT": "plain"})
    assert result.returncode == 0, result.stderr
    return result


def _stderr(settings_module: str, tmp_path) -> str:
    return _run(CODE, settings_module, tmp_path).stderr


def test_plain_lines_of_the_development_settings_mask_secrets(tmp_path):
    written = _stderr("console.settings", tmp_path)
    assert "call failed" in written and "RuntimeError" in written
    assert "[redacted]" in written
    assert not [s for s in SECRETS if s in written], written


def test_plain_lines_of_a_deployment_mask_secrets(tmp_path):
    written = _stderr("console.production", tmp_path)
    assert "call failed" in written
    assert not [s for s in SECRETS if s in written], written


def test_a_deployments_workers_log_through_the_masking_handler(tmp_path):
    code = ("import django; django.setup(); from django.conf import settings; "
            "print(settings.CELERY_WORKER_HIJACK_ROOT_LOGGER)")
    assert _run(code, "console.production", tmp_path).stdout.strip() == "False"


def test_the_plain_formatter_masks_the_line_it_writes():
    record = logging.LogRecord("runs", logging.WARNING, __file__, 1,
                               "token=%s sent", ("abc123456",), None)
    assert PlainFormatter("%(levelname)s %(message)s").format(record) == \
        "WARNING token=[redacted] sent"
