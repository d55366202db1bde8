"""Leases and fencing: one claim wins, a taken-over worker cannot record its outcome, and its
late result is kept in the run's log as evidence."""

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from audit.models import AuditRecord
from runs.execution import executor, sweeper
from runs.machine import transitions
from runs.models import Run, RunStatus, StepStatus
from tests.factories import new_run, step


def _in_thread(fn, results, barrier):
    def target():
        try:
            barrier.wait(timeout=10)
            results.append(fn())
        finally:
            connection.close()

    return threading.Thread(target=target)


@pytest.mark.django_db(transaction=True)
def test_two_workers_claiming_the_same_run_at_once_get_one_claim():
    for _ in range(5):
        run = new_run()
        results, barrier = [], threading.Barrier(2)
        threads = [_in_thread(lambda w=w, r=run: transitions.claim_run(r.pk, worker=w),
                              results, barrier) for w in ("w1", "w2")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        winners = [lease for lease in results if lease is not None]
        assert len(results) == 2 and len(winners) == 1
        run.refresh_from_db()
        assert run.lease_owner == winners[0].worker and run.fencing_token == 1
        assert AuditRecord.objects.filter(run=run, action="claimed").count() == 1
        # The first intent is in the winner's step row, claimed once.
        assert run.steps.get(position=0).attempt == 1


@pytest.mark.django_db(transaction=True)
def test_duplicate_wakeups_run_each_step_once(script):
    run = new_run()
    results, barrier = [], threading.Barrier(3)
    threads = [_in_thread(lambda w=w: executor.advance_run(run.pk, worker=w), results, barrier)
               for w in ("w1", "w2", "w3")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(results, key=str) == sorted([RunStatus.COMPLETED, None, None], key=str)
    assert [c[0] for c in script.calls] == ["fetch", "classify", "create-task", "post-ledger"]
    assert len(script.effects) == 2


@pytest.mark.django_db
def test_a_worker_whose_lease_was_taken_over_cannot_record_and_its_result_is_kept(script):
    run = new_run()
    old = transitions.claim_run(run.pk, worker="slow-worker")
    assert old.work.name == "fetch"
    later = timezone.now() + timedelta(seconds=3600)
    assert sweeper.sweep(now=later).expired == 1
    run.refresh_from_db()
    assert run.status == RunStatus.QUEUED and run.fencing_token == old.token + 1
    new = transitions.claim_run(run.pk, worker="fresh-worker", now=later)
    assert new.token == old.token + 2

    transitions.record_outcome(old, old.work, transitions.Outcome(True, value={"stale": 1},
                                                                  remote_ref="OLD"))
    run.refresh_from_db()
    fetch = step(run, "fetch")
    assert run.lease_owner == "fresh-worker" and run.status == RunStatus.RUNNING
    assert fetch.status == StepStatus.RUNNING and fetch.result is None and fetch.remote_ref == ""
    late = AuditRecord.objects.get(run=run, action="late_result")
    assert late.data["worker"] == "slow-worker" and late.data["remote_ref"] == "OLD"
    assert late.data["claim"] == old.token and late.data["current_claim"] == new.token

    assert executor.advance_run(run.pk, worker="fresh-worker") is None  # already held
    lease = transitions.record_outcome(new, new.work, transitions.Outcome(True, value={}))
    assert lease.work.name == "classify"


@pytest.mark.django_db
def test_heartbeat_extends_the_lease_only_for_the_current_holder(script):
    run = new_run()
    lease = transitions.claim_run(run.pk, worker="w1")
    first_expiry = Run.objects.get(pk=run.pk).lease_expires_at
    assert transitions.heartbeat(lease, now=timezone.now() + timedelta(seconds=10))
    assert Run.objects.get(pk=run.pk).lease_expires_at > first_expiry
    transitions.expire_lease(run.pk, now=timezone.now() + timedelta(days=1))
    assert not transitions.heartbeat(lease)


@pytest.mark.django_db
def test_sweeper_finds_only_what_is_due(script):
    from runs.machine.errors import TransientError

    script.plan["fetch"] = [TransientError("503")]
    waiting = new_run()
    executor.advance_run(waiting.pk, worker="w1")
    waiting.refresh_from_db()
    assert waiting.status == RunStatus.WAITING
    report = sweeper.sweep(now=waiting.next_wake_at - timedelta(milliseconds=1))
    assert (report.expired, report.due) == (0, 0)
    report = sweeper.sweep(now=waiting.next_wake_at)
    assert report.due == 1
