"""A lookup by key is logged as its verdict: found with the remote reference, not found, or
cannot tell. The found result is the step's result (up to 64 KB inline, sealed fields
included) and is kept on the step's row; a log line at INFO carried the whole of it."""

import logging

import pytest

from runs.execution import executor
from runs.models import RunStatus
from tests.factories import new_run, step

pytestmark = pytest.mark.django_db


def test_the_line_says_found_and_the_reference(script, caplog):
    script.plan["create-task"] = ["effect-then-raise"]
    run = new_run()

    with caplog.at_level(logging.INFO, logger="runs.execution.executor"):
        assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED

    ref = step(run, "create-task").remote_ref
    lines = [r.getMessage() for r in caplog.records if "lookup by key" in r.getMessage()]
    assert lines == [f"step create-task: outcome unknown; lookup by key: found {ref}"]
    assert "result" not in lines[0]
