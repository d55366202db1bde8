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

from django.db import connection
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from audit.models import AuditRecord
from runs.models import StepStatus


@dataclass(frozen=True)
class StepTime:
    executing: timedelta
    waiting: timedelta


# A tool call's records carry its own attempts (within its agent step's): not counted here.
_SQL = """
SELECT step_name, SUM(created_at - (data->>'started_at')::timestamptz)
FROM {table}
WHERE run_id = %s AND step_name <> '' AND data->>'started_at' IS NOT NULL
  AND data->>'tool_call' IS NULL
GROUP BY step_name
"""

_IN_FLIGHT = (StepStatus.RUNNING, StepStatus.COMPENSATING)


def step_times(run, steps, *, now: datetime | None = None) -> dict[str, StepTime]:
    """{step name: StepTime} for the steps of `run` that started. An attempt still in
    flight counts until `now`."""
    now = now or timezone.now()
    # One query on every page, whether or not a step started (constant query counts).
    started = [s for s in steps if s.started_at]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(_SQL.format(
                table=connection.ops.quote_name(AuditRecord._meta.db_table)), [run.pk])
            executing = dict(cursor.fetchall())
    else:
        executing = _executing_in_python(run)
    times = {}
    for step in started:
        busy = executing.get(step.name) or timedelta(0)
        if step.status in _IN_FLIGHT and step.attempt_started_at:
            busy += now - step.attempt_started_at
        wall = (step.finished_at or now) - step.started_at
        times[step.name] = StepTime(executing=min(busy, wall),
                                    waiting=max(wall - busy, timedelta(0)))
    return times


def _executing_in_python(run) -> dict[str, timedelta]:
    # SQLite (the demo's database) has no interval arithmetic: the same sum, here.
    totals: dict[str, timedelta] = {}
    records = (AuditRecord.objects.filter(run=run).exclude(step_name="")
               .values_list("step_name", "data", "created_at"))
    for name, data, at in records:
        began = (data or {}).get("started_at")
        if began and "tool_call" not in data:
            totals[name] = totals.get(name, timedelta(0)) + (at - parse_datetime(began))
    return totals
