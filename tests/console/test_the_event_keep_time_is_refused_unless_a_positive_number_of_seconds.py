"""RUNS_EVENT_KEEP_SECONDS (how long an event no run waits for yet is kept) must be a positive
number of seconds, at most ten years: zero or less would expire every early event as it is
kept, NaN would expire none, and a huge one overflows the dates it is added to. Any other
value stops the process at start, naming the setting; the default is seven days."""

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from console.env import env
from console.settings import EVENT_KEEP_MAX_SECONDS, event_keep_seconds

ROOT = Path(__file__).resolve().parents[2]


def test_the_default_keeps_an_event_seven_days():
    assert env("RUNS_EVENT_KEEP_SECONDS", environ={}) == 7 * 24 * 3600
    assert event_keep_seconds(7 * 24 * 3600) == 7 * 24 * 3600
    assert event_keep_seconds(0.5) == 0.5
    assert event_keep_seconds(EVENT_KEEP_MAX_SECONDS) == EVENT_KEEP_MAX_SECONDS


@pytest.mark.parametrize("value", [0, -60, math.nan, math.inf, EVENT_KEEP_MAX_SECONDS + 1])
def test_a_keep_time_that_is_not_a_positive_number_of_seconds_is_refused_naming_it(value):
    with pytest.raises(ImproperlyConfigured, match="RUNS_EVENT_KEEP_SECONDS=") as refused:
        event_keep_seconds(value)
    assert "must be a positive number of seconds" in str(refused.value)


@pytest.mark.parametrize(("raw", "problem"), [
    ("0", "RUNS_EVENT_KEEP_SECONDS=0.0 must be a positive number of seconds"),
    ("seven days", "RUNS_EVENT_KEEP_SECONDS='seven days' is not a number"),
])
def test_manage_py_stops_at_start_in_one_line_on_a_bad_keep_time(raw, problem):
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, capture_output=True, text=True,
        timeout=120, env={**os.environ, "DJANGO_SETTINGS_MODULE": "console.settings",
                          "RUNS_EVENT_KEEP_SECONDS": raw})
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert problem in line
