"""A metrics scrape costs what is open or recent, not what the database holds: finished runs
and past audit records are counted in full once per METRICS_FINISHED_RECOUNT_SECONDS, the
newer ones at every scrape, and every other count reads an index."""

import os
import re
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.models import F
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from audit.models import AuditRecord
from observability.metrics import recount_history
from runs.execution import executor
from runs.machine.errors import TransientError
from runs.models import FINAL_RUN_STATUSES, Run, RunStatus
from tests.api.test_metrics import scrape, value
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


def _completed(samples):
    return value(samples, "durable_runs", workflow="test-orders", status="completed")


def _retries_long_ago(run, n):
    """`n` retry records on `run`'s log, written two hours ago (content beside the point)."""
    long_ago = timezone.now() - timedelta(hours=2)
    AuditRecord.objects.bulk_create([
        AuditRecord(run=run, seq=10_000 + i, action="retry_scheduled", actor_kind="system",
                    actor_label="old", created_at=long_ago, prev_hash="0" * 64,
                    hash=f"{i:064x}") for i in range(n)])


def _finished_long_ago(n):
    long_ago = timezone.now() - timedelta(hours=2)
    for _ in range(n):
        place(new_run(), status=RunStatus.COMPLETED, updated_at=long_ago, finished_at=long_ago)


def test_finished_runs_are_counted_once_then_only_those_finished_since(client, settings,
                                                                       script):
    settings.METRICS_FINISHED_RECOUNT_SECONDS = 600
    _finished_long_ago(3)
    assert _completed(scrape(client)) == 3
    # Counted already: a change behind the horizon is not seen until the next recount ...
    place(new_run(), status=RunStatus.COMPLETED, updated_at=timezone.now() - timedelta(hours=2))
    assert _completed(scrape(client)) == 3
    # ... while a run that finishes now is counted at once.
    assert executor.advance_run(new_run().pk, worker="w1") == RunStatus.COMPLETED
    assert _completed(scrape(client)) == 4
    recount_history()
    assert _completed(scrape(client)) == 5


def test_audit_counters_count_the_old_records_once_then_only_the_new_ones(client, settings,
                                                                         script):
    settings.METRICS_FINISHED_RECOUNT_SECONDS = 600
    _retries_long_ago(new_run(), 5)
    assert value(scrape(client), "durable_step_retries_total") == 5
    script.plan["fetch"] = [TransientError("503")]
    executor.advance_run(new_run().pk, worker="w1")  # a retry now: counted at once
    assert value(scrape(client), "durable_step_retries_total") == 6
    recount_history()
    assert value(scrape(client), "durable_step_retries_total") == 6


def test_with_no_recount_interval_every_scrape_counts_everything(client, settings):
    settings.METRICS_FINISHED_RECOUNT_SECONDS = 0
    _finished_long_ago(2)
    assert _completed(scrape(client)) == 2
    _finished_long_ago(1)
    assert _completed(scrape(client)) == 3


def _rows_read(sql) -> int:
    """Rows the scans of runs, steps and audit records return when `sql` runs (EXPLAIN
    ANALYZE), with the plan PostgreSQL picks for a big table (on tiny ones, a scan of
    everything is cheapest)."""
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")
        try:
            cursor.execute("EXPLAIN ANALYZE " + sql)
            plan = [row[0] for row in cursor.fetchall()]
        finally:
            cursor.execute("RESET enable_seqscan")
    read = 0
    for line in plan:
        found = re.search(r"Scan .*on (runs_run|runs_step|audit_auditrecord) .*actual .* "
                          r"rows=(\d+) loops=(\d+)", line)
        if found:
            read += int(found.group(2)) * int(found.group(3))
    return read


def test_a_scrape_after_the_recount_reads_what_is_open_or_recent_not_every_run(client,
                                                                                script):
    call_command("seed_scale", runs=600, stdout=open(os.devnull, "w"))  # noqa: SIM115
    # History: all of it more than an hour old (the step duration window).
    Run.objects.filter(business_key__startswith="scale:").update(
        updated_at=F("updated_at") - timedelta(hours=2))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE runs_run")
    _retries_long_ago(new_run(), 600)
    executor.advance_run(new_run().pk, worker="w1")
    scrape(client)  # the recount: the one full read
    with CaptureQueriesContext(connection) as ctx:
        samples = scrape(client)
    finished = Run.objects.filter(status__in=FINAL_RUN_STATUSES).count()
    assert sum(v for (name, labels), v in samples.items() if name == "durable_runs"
               and dict(labels)["status"] in FINAL_RUN_STATUSES) == finished > 550
    assert value(samples, "durable_step_retries_total") == 600
    reads = [q["sql"] for q in ctx.captured_queries
             if any(f'FROM "{table}"' in q["sql"]
                    for table in ("runs_run", "runs_step", "audit_auditrecord"))]
    assert len(reads) >= 7
    read = sum(_rows_read(sql) for sql in reads)
    open_runs = Run.objects.exclude(status__in=FINAL_RUN_STATUSES).count()
    recent = Run.objects.filter(updated_at__gt=timezone.now() - timedelta(minutes=2)).count()
    # The open runs (by status and attention reason together; and those of workflows whose
    # runs may hold agent steps, for the agent metrics: here every one, of a workflow the
    # tests do not register), the runs that finished since the recount's horizon, their
    # steps and their records: not the finished runs, nor the old records.
    assert read <= 2 * open_runs + 12 * recent, (read, open_runs, recent)
    assert read < finished / 2
