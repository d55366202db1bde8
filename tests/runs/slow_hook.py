"""A sleep's until() that is slow while a file the run's input names exists, as a hook that
asks another system would be. It marks where it is with a second file, so that a test can
stop the process inside it; then it gives a time already passed, and the run goes on at
once. Declared for worker processes by tests.runs.slow_hook_workflow."""

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pydantic import BaseModel

from runs.definitions.definition import Workflow

NAME = "test-slow-until"
HELD_FOR_SECONDS = 60


class HeldIn(BaseModel):
    hold: str  # while this file exists, until() waits (up to HELD_FOR_SECONDS)


def entered(hold: str) -> Path:
    return Path(hold + ".entered")


def slow_until(data) -> datetime:
    hold = Path(data["hold"])
    entered(data["hold"]).touch()
    deadline = time.monotonic() + HELD_FOR_SECONDS
    while hold.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return datetime.now(UTC) - timedelta(seconds=1)


def declare() -> Workflow:
    """The workflow, registered from now on (runs.definitions.registry)."""
    flow = Workflow(NAME, version=1, input=HeldIn)
    flow.sleep("nap", until=slow_until)
    return flow
