"""How long each step of a run took to execute, apart from the time it waited.

A step's wall time (first start to outcome) includes every wait between its attempts:
backoff before a retry, hours parked in attention until a person reconciled it. What it
took to execute is the sum over its attempts of start to end: each attempt's one audit
record (its outcome, or the take-back of a dead worker's lease) carries when it started,
read from the run's records in one query whatever their number; an attempt still in flight
counts from the start its row holds.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone

from runs import store
from runs.models import StepStatus

_IN_FLIGHT = (StepStatus.RUNNING, StepStatus.COMPENSATING)


@dataclass(frozen=True)
class StepTime:
    executing: timedelta
    waiting: timedelta


def step_times(run, steps, *, now: datetime | None = None) -> dict[str, StepTime]:
    """{step name: StepTime} for the steps of `run` that started. An attempt still in
    flight counts until `now`."""
    now = now or timezone.now()
    # One query on every page, whether or not a step started (constant query counts).
    started = [s for s in steps if s.started_at]
    executing = store.current().executing_by_step(run.pk)
    times = {}
    for step in started:
        busy = executing.get(step.name) or timedelta(0)
        if step.status in _IN_FLIGHT and step.attempt_started_at:
            busy += now - step.attempt_started_at
        wall = (step.finished_at or now) - step.started_at
        times[step.name] = StepTime(executing=min(busy, wall),
                                    waiting=max(wall - busy, timedelta(0)))
    return times
