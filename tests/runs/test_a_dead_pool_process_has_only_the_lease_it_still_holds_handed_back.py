"""The worker hands back the lease of a pool process that died (runs.execution.
lost_pool_process) only while the run still carries that process's name and the token of its
claim: not a lease another of its processes holds, nor one taken back from the dead process
and claimed by another since (a death told late). The lease it still holds is handed back
once, done by the worker, naming the dead process."""

from datetime import timedelta

import pytest
from django.utils import timezone

from audit.actions import AuditAction
from audit.models import AuditRecord
from runs.execution import executor
from runs.execution.executor import worker_name
from runs.execution.lost_pool_process import hand_back_of_lost_process
from runs.machine import transitions
from runs.models import Run, RunStatus, Step, StepStatus
from tests.factories import make_due, new_run

pytestmark = pytest.mark.django_db(transaction=True)
DEAD, OTHER = 4242, 4343


def _take_backs(run) -> list[dict]:
    return list(AuditRecord.objects.filter(run=run, action=AuditAction.LEASE_EXPIRED)
                .order_by("seq").values("actor_label", "data"))


def test_the_lease_of_another_process_is_left_as_it_is():
    run = new_run()
    lease = transitions.claim_run(run.pk, worker=worker_name(OTHER))
    assert lease is not None
    assert not hand_back_of_lost_process(run.pk, DEAD, "signal 9 (SIGKILL)")
    run.refresh_from_db()
    assert (run.status, run.lease_owner, run.fencing_token) == \
        (RunStatus.RUNNING, worker_name(OTHER), lease.token)
    assert run.steps.get(position=0).status == StepStatus.RUNNING
    assert _take_backs(run) == []


def test_a_death_told_after_another_process_claimed_the_run_takes_nothing():
    run = new_run()
    assert transitions.claim_run(run.pk, worker=worker_name(DEAD)) is not None
    # Its lease ran out and the sweeper took it back; another process claimed the run.
    assert transitions.expire_lease(run.pk, now=timezone.now() + timedelta(hours=1))
    successor = transitions.claim_run(run.pk, worker=worker_name(OTHER))
    assert successor is not None
    assert not hand_back_of_lost_process(run.pk, DEAD, "signal 9 (SIGKILL)")
    run.refresh_from_db()
    assert (run.status, run.lease_owner, run.fencing_token) == \
        (RunStatus.RUNNING, worker_name(OTHER), successor.token)
    assert len(_take_backs(run)) == 1  # the sweeper's


def test_the_lease_the_dead_process_holds_is_handed_back_once_by_its_worker():
    run = new_run()
    lease = transitions.claim_run(run.pk, worker=worker_name(DEAD))
    assert hand_back_of_lost_process(run.pk, DEAD, "signal 9 (SIGKILL)")
    assert not hand_back_of_lost_process(run.pk, DEAD, "signal 9 (SIGKILL)")  # told twice
    run = Run.objects.get(pk=run.pk)
    assert run.status == RunStatus.QUEUED and run.lease_owner == ""
    assert run.fencing_token == lease.token + 1
    [take_back] = _take_backs(run)
    assert take_back["actor_label"] == worker_name()  # the worker, not the dead process
    assert take_back["data"]["previous_owner"] == worker_name(DEAD)
    assert take_back["data"]["handed_back"] == "its pool process died (signal 9 (SIGKILL))"


def test_a_call_that_may_still_land_unmatched_by_a_key_is_handed_back_and_not_sent_again_early(
        script):
    """The dead process's request may still reach a receiver that ignores keys after the
    hand-back. The next worker settles the step by the effect machine's one rule for every
    take-back: its lookup's first "not found" is trusted only `lookup_delay` seconds later,
    so nothing is sent again while the first request may still land."""
    run = new_run("test-messages")  # "send": low impact, ignores keys, lookup_delay 5 s
    lease = transitions.claim_run(run.pk, worker=worker_name(DEAD))
    assert lease is not None and lease.work.name == "send"
    assert hand_back_of_lost_process(run.pk, DEAD, "signal 9 (SIGKILL)")
    assert executor.advance_run(run.pk, worker=worker_name(OTHER)) == RunStatus.WAITING
    sent = Step.objects.get(run=run, name="send")
    assert sent.status == StepStatus.UNKNOWN
    assert (sent.next_attempt_at - timezone.now()).total_seconds() > 4
    assert script.calls == [] and len(script.reconcile_calls) == 1  # looked up, not sent
    # The dead process's request lands meanwhile: the lookup then finds it.
    script.effects[sent.idempotency_key] = "MSG-late"
    make_due(run)
    assert executor.advance_run(run.pk, worker=worker_name(OTHER)) == RunStatus.COMPLETED
    assert Step.objects.get(run=run, name="send").remote_ref == "MSG-late"
    assert script.calls == []  # never sent by anyone but the dead process
