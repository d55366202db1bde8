"""A number the environment gives below the least its meaning allows (console.env's
Variable.minimum: a pool of -1 connections, a sweep every 0 seconds, a lockout after 0
failed logins, archive files of 0 runs) stops the process at start with a message naming
the variable, the value and the minimum, as a malformed value does; it was taken, then
failed or misbehaved at its first use. The minimum itself is taken, and so is 0 where 0
means something (off, never, every time)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from console.env import BY_NAME, DAYS, FLOAT, INT, SOME, VARIABLES, check_environment, env

ROOT = Path(__file__).resolve().parent.parent
# Numbers with no least: a test clock may run behind (negative), and the event keep time's
# whole range (positive, finite, at most ten years) is console.settings.event_keep_seconds.
UNBOUNDED = {"RUNS_TEST_CLOCK_OFFSET_SECONDS", "RUNS_EVENT_KEEP_SECONDS"}


@pytest.mark.parametrize(("name", "below", "minimum"), [
    ("RUNS_REQUEUE_AFTER_SECONDS", "-5", SOME),
    ("RUNS_REQUEUE_AFTER_SECONDS", "0", SOME),
    ("DB_POOL_MAX_SIZE", "-1", 0),
    ("SWEEP_INTERVAL_SECONDS", "0", SOME),
    ("SWEEP_INTERVAL_SECONDS", "nan", SOME),
    ("AXES_FAILURE_LIMIT", "0", 1),
    ("ARCHIVE_RUNS_PER_FILE", "0", 1),
    ("ARCHIVE_REMOVE_BATCH", "-3", 1),
    ("ARCHIVE_MAX_RUNS_PER_PASS", "-1", 0),
    ("RUNS_RETENTION_DAYS", "-1", 0),
    ("RUNS_LEASE_SECONDS", "0.5", 1),
    ("API_RATE_LIMIT_WINDOW_SECONDS", "0", 1),
    ("API_TOKEN_DEFAULT_DAYS", "0", 1),
])
def test_a_value_below_the_minimum_is_refused_naming_it_and_the_minimum_is_taken(
        name, below, minimum):
    assert BY_NAME[name].minimum == minimum
    with pytest.raises(ImproperlyConfigured) as refused:
        env(name, environ={name: below})
    assert str(refused.value).startswith(
        f"environment variable {name}={below!r} is not at least {minimum} (")
    taken = env(name, environ={name: str(minimum)})
    assert taken == minimum


@pytest.mark.parametrize("name", ["SWEEP_INTERVAL_SECONDS", "RUNS_LEASE_SECONDS",
                                  "DB_POOL_TIMEOUT"])
def test_an_endless_duration_is_refused_naming_it(name):
    with pytest.raises(ImproperlyConfigured) as refused:
        env(name, environ={name: "inf"})
    assert str(refused.value).startswith(
        f"environment variable {name}='inf' is not a finite number, at least ")


@pytest.mark.parametrize("name", ["DB_POOL_MAX_SIZE", "RUNS_HEARTBEAT_SECONDS",
                                  "AUDIT_CHECKPOINT_INTERVAL_SECONDS",
                                  "METRICS_FINISHED_RECOUNT_SECONDS", "DB_CONN_MAX_AGE",
                                  "ARCHIVE_MAX_RUNS_PER_PASS", "RUNS_RETENTION_DAYS"])
def test_zero_is_taken_where_it_means_something(name):
    assert env(name, environ={name: "0"}) == 0


def test_every_number_declares_its_minimum_and_every_default_meets_it():
    numbers = [v for v in VARIABLES if v.kind in (INT, FLOAT, DAYS)]
    undeclared = [v.name for v in numbers if v.minimum is None and v.name not in UNBOUNDED]
    assert not undeclared, f"numbers without a minimum in console/env.py: {undeclared}"
    for variable in numbers:
        if variable.default is not None:
            env(variable.name, environ={})  # a default below its minimum would raise here
    days = env("API_TOKEN_DEFAULT_DAYS", environ={"API_TOKEN_DEFAULT_DAYS": "none"})
    assert days is None  # "never" is no number, and has no least


def test_the_environment_check_names_every_value_below_its_minimum_at_once():
    with pytest.raises(ImproperlyConfigured) as refused:
        check_environment({"DB_POOL_MAX_SIZE": "-1", "SWEEP_INTERVAL_SECONDS": "0",
                           "AXES_FAILURE_LIMIT": "5"})
    message = str(refused.value)
    assert "DB_POOL_MAX_SIZE='-1' is not at least 0" in message
    assert "SWEEP_INTERVAL_SECONDS='0' is not at least 0.1" in message
    assert "AXES_FAILURE_LIMIT" not in message


@pytest.mark.parametrize(("name", "raw", "minimum"), [("DB_POOL_MAX_SIZE", "-1", "0"),
                                                      ("SWEEP_INTERVAL_SECONDS", "0", "0.1"),
                                                      ("AXES_FAILURE_LIMIT", "0", "1")])
def test_manage_py_given_a_value_below_its_minimum_stops_in_one_line(name, raw, minimum):
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, capture_output=True, text=True,
        timeout=120, env={**os.environ, "DJANGO_SETTINGS_MODULE": "console.settings",
                          name: raw})
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert re.fullmatch(rf"manage\.py: environment variable {name}='{re.escape(raw)}' is not "
                        rf"at least {re.escape(minimum)} \(.*\)", line), line
    assert "System check identified" not in result.stdout
