"""How long each step of a run took to execute, apart from the time it waited.

A step's wall time (first intent to outcome) includes every wait between its attempts:
backoff before a retry, hours parked in attention until a person reconciled it. What it
took to execute is the sum over its attempts of intent to the record that followed it (the
attempt's outcome), read from the run's audit records in one query whatever their number.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone

from runs import store


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
    executing = store.current().executing_by_step(run.pk, now)
    times = {}
    for step in started:
        busy = executing.get(step.name) or timedelta(0)
        wall = (step.finished_at or now) - step.started_at
        times[step.name] = StepTime(executing=min(busy, wall),
                                    waiting=max(wall - busy, timedelta(0)))
    return times
