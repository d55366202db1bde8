"""DATA_UPLOAD_MAX_MEMORY_SIZE, the largest request body read, took any value from 1 byte:
every request with a body (the admin's forms, the API's JSON) was then refused with 413,
and a run input within RUNS_INPUT_MAX_BYTES with a 413 that named neither. A process now
refuses at start a body limit under three times RUNS_INPUT_MAX_BYTES (an input sent with
its non-ASCII characters escaped) plus 64 KB (room for the rest of the request, and more
than any form sends), naming both variables."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _check(**variables) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, capture_output=True, text=True,
        timeout=120, env={**os.environ, "DJANGO_SETTINGS_MODULE": "console.settings",
                          **variables})


@pytest.mark.parametrize(("body", "run_input", "least"), [
    ("1", None, 3 * 262144 + 65536),
    ("65536", None, 3 * 262144 + 65536),
    # Enough for the input sent compact, not escaped.
    ("327680", None, 3 * 262144 + 65536),
    ("3211263", "1048576", 3 * 1048576 + 65536),
])
def test_a_body_limit_below_a_run_input_and_its_room_stops_manage_py_naming_both(
        body, run_input, least):
    given = {"DATA_UPLOAD_MAX_MEMORY_SIZE": body}
    if run_input is not None:
        given["RUNS_INPUT_MAX_BYTES"] = run_input

    result = _check(**given)

    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert re.fullmatch(
        rf"manage\.py: environment variable DATA_UPLOAD_MAX_MEMORY_SIZE='{body}' is not at "
        rf"least {least}: 3 × RUNS_INPUT_MAX_BYTES \({(least - 65536) // 3}\) \+ 65536 "
        rf"\(.*\)",
        line), line
    assert "System check identified" not in result.stdout

