"""A bulk job whose runs wait for a second person in one four-eyes request, shared by the
tests of who may see and decide that request and of which request the job names."""

from approvals.bulk import run_bulk_job, start_bulk_job
from approvals.models import BulkJob
from runs.models import Run, RunStatus, StepStatus
from runs.reads.selectors import RunFilters
from tests.factories import new_run, place

# The steps whose success is a high-impact effect in each test workflow: ending a run
# where they stand takes a second person.
EFFECTS = {"test-orders": {"create-task": StepStatus.SUCCEEDED,
                           "post-ledger": StepStatus.SUCCEEDED},
           "test-charge-then-wait": {"charge": StepStatus.SUCCEEDED}}


def run_with_an_effect(workflow: str = "test-orders") -> Run:
    """A run in attention whose high-impact effects took place."""
    return place(new_run(workflow), status=RunStatus.ATTENTION,
                 step_statuses=EFFECTS[workflow])


def bulk_terminate(*, user, workflow: str = "") -> BulkJob:
    """`user`'s bulk terminate of every run in attention (of `workflow`, if given), worked
    through as a worker would: the runs with an effect wait in one request (job.approval)."""
    job, _ = start_bulk_job(
        "terminate", RunFilters(workflow=workflow, workflow_exact=bool(workflow),
                                status=RunStatus.ATTENTION),
        user=user, reason="incident 42")
    job = run_bulk_job(job.pk)
    assert job.approval_id is not None
    return job
