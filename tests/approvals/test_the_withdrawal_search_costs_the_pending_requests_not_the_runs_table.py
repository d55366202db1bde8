"""Every pass of the approvals sweep looks for pending requests their run no longer waits
for. That search reads the runs of the pending requests, one by primary key each: never the
runs table, which holds every run ever kept (a merge join along its primary key, or a hash
of all of it, read a million rows every few seconds to find none)."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from approvals import schedule
from approvals.models import ApprovalRequest
from runs.models import Run, RunStatus
from tests.approvals.conftest import open_request, waiting_run
from tests.approvals.scale import add_requests

pytestmark = pytest.mark.django_db


def _finished_runs(template: Run, first_id: int, count: int) -> None:
    # Finished runs with ids below the waiting ones': the older history a deployment keeps.
    fields = {f.attname: getattr(template, f.attname) for f in Run._meta.concrete_fields
              if not f.primary_key}
    Run.objects.bulk_create([
        Run(**{**fields, "id": first_id + n, "business_key": f"old-{first_id + n}",
               "status": RunStatus.COMPLETED}) for n in range(count)], batch_size=5000)


def _runs_read() -> tuple[int, str]:
    """Rows of runs_run the withdrawal search reads, by its plan as executed."""
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE runs_run")
        cursor.execute("ANALYZE approvals_approvalrequest")
    with CaptureQueriesContext(connection) as ctx:
        assert schedule.withdraw_stale_requests() == 0
    (sql,) = [q["sql"] for q in ctx.captured_queries]
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN ANALYZE " + sql)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    return rows_read(plan, "runs_run"), plan


def rows_read(plan: str, table: str) -> int:
    """The rows the scans of `table` in `plan` looked at: those they returned and those
    their filter removed, in every loop (a look by primary key counts one at least)."""
    read = 0
    nodes = re.split(r"\n\s*->", plan)
    for node in nodes:
        scan = re.search(rf"Scan .*on {table} .*actual .* rows=(\d+) loops=(\d+)", node)
        if scan is None:
            continue
        removed = re.search(r"Rows Removed by Filter: (\d+)", node)
        rows = int(scan[1]) + (int(removed[1]) if removed else 0)
        read += max(rows, 1) * int(scan[2])
    return read


def test_the_withdrawal_search_reads_as_many_runs_among_2000_as_among_200(approvers):
    template = open_request(waiting_run())
    # Room below the waiting runs for the history added at each size.
    with connection.cursor() as cursor:
        cursor.execute("SELECT setval(pg_get_serial_sequence('runs_run', 'id'), %s)",
                       [template.run_id + 5_000])
    add_requests(template, pending=30, workflows=3)
    pending = ApprovalRequest.objects.filter(status="pending").count()
    assert pending == 31

    _finished_runs(template.run, template.run_id + 1, 200)
    small, small_plan = _runs_read()
    _finished_runs(template.run, template.run_id + 201, 1_800)
    large, large_plan = _runs_read()

    assert large == small, large_plan
    # A few looks by primary key per pending request at most, never the table.
    assert small <= 4 * pending, small_plan
