"""The sweeper after a mass worker death: expired leases are taken back in batches, with the
same records as one at a time, and two passes of the sweep never run at once."""

import re
from datetime import timedelta

import psycopg
import pytest
from celery.signals import before_task_publish
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from audit.models import AuditRecord
from runs import store
from runs.execution import sweeper
from runs.machine import single_pass, transitions
from runs.models import Run, RunEvent, RunStatus, StepStatus
from tests.factories import new_run, step


def _held_past_its_lease(n):
    """`n` runs whose worker died while their write step create-task was in flight."""
    runs = []
    for _ in range(n):
        run = new_run()
        lease = transitions.claim_run(run.pk, worker="gone")
        for _ in range(2):  # fetch and classify succeed, create-task is in flight
            lease = transitions.record_outcome(lease, lease.work,
                                               transitions.Outcome(True, value={}))
        assert lease.work.name == "create-task"
        runs.append(Run.objects.get(pk=run.pk))
    return runs


def _hints():
    sent = []

    def count(sender=None, body=None, headers=None, **kwargs):
        sent.append(headers["argsrepr"])

    before_task_publish.connect(count, weak=False)
    return sent, lambda: before_task_publish.disconnect(count)


def _outcome(run):
    run = Run.objects.get(pk=run.pk)
    records = list(AuditRecord.objects.filter(run=run).order_by("seq")
                   .values_list("action", "step_name", "before", "after"))
    return (run.status, run.fencing_token, run.lease_owner, run.lease_expires_at,
            step(run, "create-task").status, step(run, "create-task").error_class,
            records[-2:], RunEvent.objects.filter(run=run).order_by("-pk")
            .values_list("status_from", "status_to").first())


@pytest.mark.django_db(transaction=True)
def test_a_mass_worker_death_is_taken_back_in_batches_as_one_at_a_time_would(monkeypatch):
    alone, *batched = _held_past_its_lease(8)
    later = timezone.now() + timedelta(hours=1)
    assert transitions.expire_lease(alone.pk, now=later)
    monkeypatch.setattr(sweeper, "BATCH", 3)
    sent, stop = _hints()
    try:
        report = sweeper.sweep(now=later)
    finally:
        stop()
    assert (report.expired, report.locked_out) == (7, False)
    expected = _outcome(alone)
    assert expected[0] == RunStatus.QUEUED and expected[4] == StepStatus.UNKNOWN
    for run in batched:
        assert _outcome(run) == expected
    # A hint per run taken back, sent once its batch committed.
    assert sorted(sent) == sorted(f"({run.pk},)" for run in batched)
    call_command("verify_audit")


@pytest.mark.django_db(transaction=True)
def test_a_batch_leaves_alone_the_runs_that_are_no_longer_past_their_lease():
    dead, alive = _held_past_its_lease(2)
    later = timezone.now() + timedelta(hours=1)
    Run.objects.filter(pk=alive.pk).update(lease_expires_at=later + timedelta(minutes=1))
    assert transitions.expire_leases([dead.pk, alive.pk], now=later) == [dead.pk]
    assert Run.objects.get(pk=alive.pk).status == RunStatus.RUNNING
    assert step(alive, "create-task").status == StepStatus.RUNNING
    assert not AuditRecord.objects.filter(run=alive, action="lease_expired").exists()


@pytest.mark.django_db(transaction=True)
def test_two_passes_of_the_sweep_never_run_at_once():
    (run,) = _held_past_its_lease(1)
    later = timezone.now() + timedelta(hours=1)
    db = connection.settings_dict
    other = psycopg.connect(host=db["HOST"], port=db["PORT"], user=db["USER"],
                            dbname=db["NAME"], autocommit=True)
    try:
        # Another pass, in another worker, holds the job's lock.
        other.execute("SELECT pg_advisory_lock(%s)", [single_pass.lock_key(sweeper.JOB)])
        assert sweeper.sweep(now=later).locked_out
        assert Run.objects.get(pk=run.pk).status == RunStatus.RUNNING
        other.execute("SELECT pg_advisory_unlock(%s)", [single_pass.lock_key(sweeper.JOB)])
        report = sweeper.sweep(now=later)
        assert (report.locked_out, report.expired) == (False, 1)
        # The pass let go of the lock when it ended.
        assert other.execute("SELECT pg_try_advisory_lock(%s)",
                             [single_pass.lock_key(sweeper.JOB)]).fetchone()[0]
    finally:
        other.close()


def test_without_postgresql_a_file_lock_keeps_passes_apart(tmp_path, settings):
    settings.VAR_DIR = tmp_path
    sqlite, key = store.SqliteStore(), single_pass.lock_key("runs.sweep")
    with sqlite.pass_lock("runs.sweep", key) as first:
        with sqlite.pass_lock("runs.sweep", key) as second:
            assert (first, second) == (True, False)
    with sqlite.pass_lock("runs.sweep", key) as again:
        assert again
    assert (tmp_path / "locks" / "runs.sweep.lock").exists()


@pytest.mark.django_db
def test_a_sweep_with_nothing_due_reads_only_its_partial_indexes():
    new_run()  # queued, but not yet lost
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'runs_run' "
                       "AND indexdef LIKE '%% WHERE %%'")
        partial = {name for (name,) in cursor.fetchall()}
        cursor.execute("SET enable_seqscan = off")
    try:
        with CaptureQueriesContext(connection) as ctx:
            report = sweeper.sweep()
        assert (report.expired, report.due, report.requeued) == (0, 0, 0)
        for query in ctx.captured_queries:
            if "runs_run" not in query["sql"]:
                continue
            with connection.cursor() as cursor:
                cursor.execute("EXPLAIN " + query["sql"])
                plan = "\n".join(row[0] for row in cursor.fetchall())
            # Each reads one of the runs' partial indexes: as many entries as runs are held,
            # due, queued or open, whatever the number of finished runs.
            # (A bitmap heap scan reads the rows its bitmap index scan found.)
            read = set(re.findall(r"(?<!Heap )Scan (?:using|on) (\w+)", plan))
            assert "Seq Scan" not in plan and read and read <= partial, plan
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET enable_seqscan")
