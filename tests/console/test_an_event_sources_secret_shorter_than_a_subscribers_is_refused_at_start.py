"""A RUNS_EVENT_SOURCES source signing with a secret of a few characters was taken, while a
webhook subscriber's secret needs 16 and a key ring's 32: a signature made with a short
secret proves nothing, since whoever wants to forge an event tries every secret that short.
A source's `secret`, and its `previous_secret` (accepted as the new one is, during a
rotation), shorter than the subscribers' least stops the process at start, naming the source
and the field, never the secret."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from api.subscribers import SECRET_MIN_LENGTH
from console.settings import EVENT_SOURCE_SECRET_MIN_LENGTH, event_sources

ROOT = Path(__file__).resolve().parents[2]
LONG = "Vt3qN8wLx2Rk9bZp"
LONG_BEFORE = "Hs7mC4yQe1Jd6gFa"


def test_a_source_secret_is_held_to_the_subscribers_least():
    assert EVENT_SOURCE_SECRET_MIN_LENGTH == SECRET_MIN_LENGTH == len(LONG) == len(LONG_BEFORE)


@pytest.mark.parametrize("short", ["Zq8vL", LONG[:-1]])
@pytest.mark.parametrize("field", ["secret", "previous_secret"])
def test_a_short_secret_is_refused_naming_the_source_and_the_field(field, short):
    source = {"secret": LONG, "previous_secret": LONG_BEFORE, field: short}
    with pytest.raises(ImproperlyConfigured) as refused:
        event_sources(json.dumps({"psp": source}))

    message = str(refused.value)
    assert message.startswith(
        f"RUNS_EVENT_SOURCES: source 'psp' has a \"{field}\" shorter than 16 characters")
    assert short not in message and LONG[:5] not in message and LONG_BEFORE[:5] not in message


def test_secrets_of_the_least_length_are_taken():
    sources = {"psp": {"secret": LONG, "previous_secret": LONG_BEFORE},
               "bank": {"secret": LONG + LONG_BEFORE, "workflows": ["order-fulfilment"]}}
    assert event_sources(json.dumps(sources)) == sources


def test_manage_py_stops_at_start_in_one_line_on_a_short_secret():
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, capture_output=True, text=True,
        timeout=120, env={**os.environ, "DJANGO_SETTINGS_MODULE": "console.settings",
                          "RUNS_EVENT_SOURCES": json.dumps({"psp": {"secret": "Zq8vL"}})})

    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "RUNS_EVENT_SOURCES: source 'psp' has a \"secret\" shorter than 16" in line
    assert "Zq8vL" not in line
