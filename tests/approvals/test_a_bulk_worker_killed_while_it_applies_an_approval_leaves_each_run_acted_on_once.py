"""A real Celery worker SIGKILLed while it applies a bulk job's approval, at the worst moment
(a run acted on, its outcome written, the commit not made): the run keeps waiting, as if
the worker had never come to it; once the job's lease is over the approvals sweep hands the
job to a second worker, which finishes it. Every run is acted on exactly once, with one
audit record carrying the decision's id, and the approval is recorded once."""

import uuid

import pytest
from django.contrib.auth.models import Group, Permission, User

from approvals import tasks
from approvals.bulk import bulk_progress
from approvals.decisions import decide
from approvals.models import ApprovalRequest, BulkJob, BulkOutcome, RequestStatus
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.models import Run, RunStatus
from tests.approvals.bulk_requests import bulk_terminate, run_with_an_effect
from tests.processes import kill_hard, start_worker, stop, wait_for

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("empty_broker")]
LEASE = 2


def test_a_worker_killed_mid_approval_is_replaced_and_each_run_is_acted_on_once(tmp_path):
    ensure_roles(Group, Permission)
    olga, carl = (User.objects.create_user(name) for name in ("olga", "carl"))
    for user in (olga, carl):
        user.groups.add(Group.objects.get(name="operators"))
    runs = [run_with_an_effect() for _ in range(5)]
    job = bulk_terminate(user=carl)  # acted on in this process: each run waits for olga
    victim = runs[2]
    marker = tmp_path / "crashed"
    doomed = start_worker("doomed", tmp_path, BULK_JOB_LEASE_SECONDS=LEASE,
                          RUNS_CRASH_AT=f"bulk_applied:{victim.pk}", RUNS_CRASH_MARKER=marker)
    try:
        # Committed, the approval hands the job to a worker: this one.
        decision = decide(job.approval_id, user=olga, approved=True, decision_id=uuid.uuid4())
        assert decision.recorded, decision.message
        wait_for(marker.exists, timeout=90, what="the worker to reach bulk_applied")
    finally:
        kill_hard(doomed)
    assert doomed.returncode == -9
    outcomes = dict(BulkOutcome.objects.filter(job=job).values_list("run_id", "outcome"))
    assert outcomes == {runs[0].pk: "done", runs[1].pk: "done", victim.pk: "second_person",
                        runs[3].pk: "second_person", runs[4].pk: "second_person"}
    assert Run.objects.get(pk=victim.pk).status == RunStatus.ATTENTION
    assert not AuditRecord.objects.filter(run=victim, action="terminated").exists()
    assert BulkJob.objects.get(pk=job.pk).status == "running"

    rescuer = start_worker("rescuer", tmp_path, BULK_JOB_LEASE_SECONDS=LEASE)
    try:
        def finished():
            tasks.sweep()  # as beat would: a job no live worker holds is enqueued again
            return BulkJob.objects.get(pk=job.pk).status == "done"

        wait_for(finished, timeout=90, interval=1, what="the second worker to finish the job")
    finally:
        stop(rescuer)
    assert "approvals.bulk_job" in (tmp_path / "rescuer.log").read_text()  # it did the rest
    assert bulk_progress(job.pk).counts == {"done": 5}
    request = ApprovalRequest.objects.get(pk=job.approval_id)
    assert request.status == RequestStatus.APPROVED and request.decided_by == olga
    for run in runs:
        assert Run.objects.get(pk=run.pk).status == RunStatus.TERMINATED
        (record,) = AuditRecord.objects.filter(run=run, action="terminated")
        assert (record.actor_label, record.data["approved_by"]) == ("carl", "olga")
        assert AuditRecord.objects.filter(
            run=run, data__decision_id=str(request.decision_id)).count() == 1, run.pk
