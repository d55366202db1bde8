"""How long each step of a run took to execute, apart from the time it waited.

A step's wall time (first intent to outcome) includes every wait between its attempts:
backoff before a retry, hours parked in attention until a person reconciled it. What it
took to execute is the sum over its attempts of intent to the record that followed it (the
attempt's outcome), read from the run's audit records in one query whatever their number.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection
from django.utils import timezone

from audit.actions import AuditAction
from audit.models import AuditRecord


@dataclass(frozen=True)
class StepTime:
    executing: timedelta
    waiting: timedelta


_SQL = """
SELECT step_name, SUM(COALESCE(next_at, %s) - created_at)
FROM (SELECT step_name, action, created_at,
             LEAD(created_at) OVER (PARTITION BY step_name ORDER BY seq) AS next_at
      FROM {table} WHERE run_id = %s AND step_name <> '') AS attempts
WHERE action = %s
GROUP BY step_name
"""


def step_times(run, steps, *, now: datetime | None = None) -> dict[str, StepTime]:
    """{step name: StepTime} for the steps of `run` that started. An attempt still in
    flight counts until `now`."""
    now = now or timezone.now()
    # One query on every page, whether or not a step started (constant query counts).
    started = [s for s in steps if s.started_at]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(_SQL.format(
                table=connection.ops.quote_name(AuditRecord._meta.db_table)),
                [now, run.pk, AuditAction.INTENT])
            executing = dict(cursor.fetchall())
    else:
        executing = _executing_in_python(run, now)
    times = {}
    for step in started:
        busy = executing.get(step.name) or timedelta(0)
        wall = (step.finished_at or now) - step.started_at
        times[step.name] = StepTime(executing=min(busy, wall),
                                    waiting=max(wall - busy, timedelta(0)))
    return times


def _executing_in_python(run, now: datetime) -> dict[str, timedelta]:
    # SQLite (the demo's database) has no interval arithmetic: the same pairing, here.
    totals: dict[str, timedelta] = {}
    open_intents: dict[str, datetime] = {}
    records = (AuditRecord.objects.filter(run=run).exclude(step_name="").order_by("seq")
               .values_list("step_name", "action", "created_at"))
    for name, action, at in records:
        began = open_intents.pop(name, None)
        if began is not None:
            totals[name] = totals.get(name, timedelta(0)) + (at - began)
        if action == AuditAction.INTENT:
            open_intents[name] = at
    for name, began in open_intents.items():
        totals[name] = totals.get(name, timedelta(0)) + (now - began)
    return totals
