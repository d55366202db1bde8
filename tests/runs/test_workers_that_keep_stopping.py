"""A run whose workers keep stopping at the same point (a step that kills its process, a
checkpoint the database refuses) is not tried again forever: after
RUNS_TAKE_BACKS_BEFORE_ATTENTION take-backs in a row with nothing recorded between, it waits
for a person, saying where it stopped. Real workers, killed by SIGKILL."""

import pytest

from audit.models import AuditRecord
from runs.execution import sweeper
from runs.machine import transitions
from runs.machine.transitions.leases import take_backs_in_a_row
from runs.models import AttentionReason, Run, RunStatus, StepStatus
from runs.operator.guidance import recommend
from tests.factories import SYSTEM, new_run, step
from tests.processes import start_worker, stop, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_broker")]
LEASE = 1


def _let_it_die_at_fetch(tmp_path, name):
    """A worker that kills itself (SIGKILL) each time it is about to call `fetch`."""
    doomed = start_worker(name, tmp_path, RUNS_LEASE_SECONDS=LEASE,
                          RUNS_CRASH_AT="before_call:fetch", RUNS_CRASH_MODE="self")
    try:
        wait_for(lambda: doomed.poll() is not None, timeout=60, what=f"{name} to die at fetch")
    finally:
        stop(doomed)
    assert doomed.returncode == -9


def _take_back(run):
    wait_for(lambda: sweeper.sweep().expired == 1, timeout=30, interval=0.3,
             what="the lease to expire and be taken back")
    return Run.objects.get(pk=run.pk)


def test_a_run_whose_workers_keep_stopping_at_one_step_waits_for_a_person(tmp_path, settings):
    settings.RUNS_TAKE_BACKS_BEFORE_ATTENTION = 2
    run = new_run()
    _let_it_die_at_fetch(tmp_path, "doomed-1")
    run = _take_back(run)
    # Below the limit: tried again, by the next worker.
    assert run.status == RunStatus.QUEUED and step(run, "fetch").attempt == 1
    _let_it_die_at_fetch(tmp_path, "doomed-2")
    run = _take_back(run)

    assert run.status == RunStatus.ATTENTION
    assert run.attention_reason == AttentionReason.WORKERS_KEEP_STOPPING
    assert "2 times in a row" in run.status_message and "at fetch" in run.status_message
    assert run.lease_owner == "" and run.lease_expires_at is None
    assert step(run, "fetch").status == StepStatus.PENDING and step(run, "fetch").attempt == 2
    # Nothing after the point where it stopped was started.
    assert all(s.attempt == 0 for s in run.steps.exclude(name="fetch"))
    counts = list(AuditRecord.objects.filter(run=run, action="lease_expired")
                  .order_by("seq").values_list("data__in_a_row", flat=True))
    assert counts == [1, 2]

    # The console's next step for it: resume, once the cause is fixed.
    advice = recommend(run, list(run.steps.all()))
    assert advice.action is not None and advice.action.name == "resume"
    assert "fetch" in advice.why and advice.reason_label == "workers keep stopping at this point"
    # A sweep finds nothing more to take back: it is no longer tried.
    assert sweeper.sweep().expired == 0
    # A person resumes it (the cause fixed): a healthy worker finishes it, each effect once.
    transitions.resume(run.pk, actor=SYSTEM, reason="fixed the parser that crashed")
    assert take_backs_in_a_row(run.pk) == 0
    healthy = start_worker("healthy", tmp_path, RUNS_LEASE_SECONDS=LEASE)
    try:
        wait_for(lambda: Run.objects.get(pk=run.pk).status == RunStatus.COMPLETED,
                 timeout=60, what="the resumed run to complete")
    finally:
        stop(healthy)
    run = Run.objects.get(pk=run.pk)
    for name in ("create-task", "post-ledger"):
        assert step(run, name).status == StepStatus.SUCCEEDED and step(run, name).attempt == 1
    assert step(run, "fetch").attempt == 3


def test_an_outcome_between_two_take_backs_starts_the_count_again(settings):
    settings.RUNS_TAKE_BACKS_BEFORE_ATTENTION = 2
    from datetime import timedelta

    from django.utils import timezone

    from runs.execution import executor
    from tests.workflows import script

    script.reset()
    run = new_run(wake=False)
    lease = transitions.claim_run(run.pk, worker="w1")
    assert transitions.expire_lease(run.pk, now=timezone.now() + timedelta(hours=1))
    assert take_backs_in_a_row(run.pk) == 1
    # The next worker records fetch's outcome, then stops at classify.
    lease = transitions.claim_run(run.pk, worker="w2")
    lease = transitions.record_outcome(lease, lease.work, transitions.Outcome(True, value={}))
    assert take_backs_in_a_row(run.pk) == 0
    assert transitions.expire_lease(run.pk, now=timezone.now() + timedelta(hours=2))
    run = Run.objects.get(pk=run.pk)
    # One take-back since the outcome, not two: it is tried again.
    assert run.status == RunStatus.QUEUED and take_backs_in_a_row(run.pk) == 1
    assert executor.advance_run(run.pk, worker="w3") == RunStatus.COMPLETED
