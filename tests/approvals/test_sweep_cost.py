"""The approvals sweep costs what is due, not what the database holds: the approval steps
runs wait on come from their own table (runs.ApprovalWait, a row per wait while it lasts),
no step or run is searched, and only one pass runs at a time."""

import os
import re

import psycopg
import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from approvals import schedule
from approvals.models import ApprovalRequest
from runs.machine.single_pass import lock_key
from runs.models import Run, RunStatus
from tests.approvals.conftest import waiting_run

pytestmark = pytest.mark.django_db


def _plan(sql) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")  # tiny tables are cheapest to scan
        try:
            cursor.execute("EXPLAIN ANALYZE " + sql)
            return "\n".join(row[0] for row in cursor.fetchall())
        finally:
            cursor.execute("RESET enable_seqscan")


def test_finding_the_approval_steps_to_open_reads_only_the_waiting_ones(approvers):
    call_command("seed_scale", runs=600, stdout=open(os.devnull, "w"))  # noqa: SIM115
    assert Run.objects.filter(status=RunStatus.WAITING).count() > 10  # waiting, not on us
    run = waiting_run()
    with CaptureQueriesContext(connection) as ctx:
        report = schedule.sweep()
    assert report.opened == 1 and ApprovalRequest.objects.filter(run=run).exists()
    (sql,) = [q["sql"] for q in ctx.captured_queries
              if q["sql"].startswith('SELECT "runs_approvalwait"')]
    plan = _plan(sql)
    assert "runs_step" not in plan, plan  # no step is searched
    # The one wait row, and its run by primary key: nothing else of runs is read.
    # (A bitmap index scan names the index whose entries its heap scan, counted, reads.)
    scans = re.findall(r"(?<!Bitmap Index )Scan .*on (runs_\w+) .*actual .* rows=(\d+) "
                       r"loops=(\d+)", plan)
    assert {table for table, _, _ in scans} <= {"runs_approvalwait", "runs_run"}, plan
    read = sum(int(rows) * int(loops) for _, rows, loops in scans)
    assert read <= 2, plan


def test_two_passes_of_the_approvals_sweep_never_run_at_once(approvers):
    run = waiting_run()
    db = connection.settings_dict
    other = psycopg.connect(host=db["HOST"], port=db["PORT"], user=db["USER"],
                            dbname=db["NAME"], autocommit=True)
    try:
        other.execute("SELECT pg_advisory_lock(%s)", [lock_key(schedule.JOB)])
        report = schedule.sweep()
        assert report.locked_out and report.opened == 0
        assert not ApprovalRequest.objects.filter(run=run).exists()
        other.execute("SELECT pg_advisory_unlock(%s)", [lock_key(schedule.JOB)])
        report = schedule.sweep()
        assert not report.locked_out and report.opened == 1
    finally:
        other.close()
