"""RUNS_EVENT_SOURCES names who may send signed event webhooks and to which workflows. A
value read as it came went wrong without a word: `workflows` written as one name was a
substring test (a source for "order-fulfilment" could send to "order"), a misspelt
`workflow` let the source send to every workflow, and a source that was no object answered
each of its webhooks with a server error. Each stops the process at start, naming the
source and what is wrong, never a secret."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from console.settings import event_sources

ROOT = Path(__file__).resolve().parents[2]
SECRET = "Zq8vLw3xKp5mT2nR"


def test_sources_written_as_documented_are_taken_as_they_are():
    sources = {"psp": {"secret": SECRET, "workflows": ["order-fulfilment"]},
               "bank": {"secret": SECRET}}
    assert event_sources(json.dumps(sources)) == sources
    assert event_sources("") == {} and event_sources("{}") == {}


@pytest.mark.parametrize(("sources", "problem"), [
    (["psp"], "must be a JSON object of sources"),
    ({"psp": SECRET}, "source 'psp' must be an object"),
    ({"psp": {"secret": SECRET, "workflow": ["orders"]}},
     "source 'psp' has the unknown setting(s) 'workflow'"),
    ({"psp": {"secret": SECRET, "workflows": "order-fulfilment"}},
     "source 'psp' has \"workflows\" that is not a list of workflow names"),
    ({"psp": {"secret": SECRET, "workflows": [7]}}, "that is not a list"),
    ({"psp": {"workflows": ["orders"]}}, "source 'psp' has no \"secret\""),
    ({"psp": {"secret": "  "}}, "source 'psp' has no \"secret\""),
    ({"a/b": {"secret": SECRET}}, "without '/'"),
    ({"": {"secret": SECRET}}, "1 to 100 characters"),
])
def test_a_source_written_wrongly_is_refused_naming_it_and_never_its_secret(sources, problem):
    with pytest.raises(ImproperlyConfigured) as refused:
        event_sources(json.dumps(sources))

    assert problem in str(refused.value)
    assert str(refused.value).startswith("RUNS_EVENT_SOURCES")
    assert SECRET not in str(refused.value)


def test_a_value_that_is_not_json_is_refused_by_its_position_never_its_text():
    with pytest.raises(ImproperlyConfigured, match=r"is not JSON \(line 1, column") as refused:
        event_sources('{"psp": {"secret": "%s",}}'.replace("%s", SECRET))
    assert SECRET not in str(refused.value)


def test_manage_py_stops_at_start_in_one_line_on_a_source_written_wrongly():
    sources = {"psp": {"secret": SECRET, "workflows": "order-fulfilment"}}
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, capture_output=True, text=True,
        timeout=120, env={**os.environ, "DJANGO_SETTINGS_MODULE": "console.settings",
                          "RUNS_EVENT_SOURCES": json.dumps(sources)})

    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "RUNS_EVENT_SOURCES: source 'psp'" in line and SECRET not in line
