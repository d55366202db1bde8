"""A bulk job whose runs wait for a second person in one four-eyes request, shared by the
tests of who may see and decide that request and of which request the job names."""

from approvals.bulk import run_bulk_job, start_bulk_job
from approvals.models import BulkJob
from runs.models import Run, RunStatus, Step, StepStatus
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


def copies_of(run: Run, count: int) -> list[Run]:
    """`count` more runs like `run`, its steps with them, in two inserts."""
    def fields(obj, **changes):
        return {**{f.attname: getattr(obj, f.attname) for f in obj._meta.concrete_fields
                   if not f.primary_key}, **changes}
    runs = Run.objects.bulk_create([Run(**fields(run, business_key=f"{run.business_key}-{n}"))
                                    for n in range(count)])
    steps = [fields(step) for step in Step.objects.filter(run=run)]
    Step.objects.bulk_create([Step(**{**step, "run_id": copy.pk}) for copy in runs
                              for step in steps])
    return runs
