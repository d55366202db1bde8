"""A drill's row in the drill table: passed, failed, or not exercised and why."""

from dataclasses import dataclass

from ..models import Run, RunStatus
from .drill_waits import event_not_made_up, unreached


@dataclass(frozen=True)
class DrillResult:
    drill: str
    expected: str
    observed: str
    passed: bool | None  # None: does not apply to this workflow, or was not exercised
    # False: it applies, but no worker reaches its crash point for want of a step to crash at.
    exercised: bool = True


def not_exercised(title: str, expected: str, why: str) -> DrillResult:
    return DrillResult(title, expected, f"not exercised: {why}", None, exercised=False)


def short_of(title: str, expected: str, run: Run) -> DrillResult:
    """The row of a drill whose worker stopped short of its crash point: not exercised where
    `run` waits for an event the drill does not make up (the crash point lies behind it), a
    failure otherwise."""
    if (why := event_not_made_up(run)) is not None:
        return not_exercised(title, expected, why)
    return DrillResult(title, expected, unreached(run), False)


def went_through(run: Run) -> bool:
    """Whether recovered run `run` went as far as a drill takes it: completed, or waiting for
    an event the drill does not make up (what lies behind it is the drills' it is not)."""
    return run.status == RunStatus.COMPLETED or event_not_made_up(run) is not None
