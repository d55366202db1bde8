"""A bulk job of Reconcile asks the remote system by each run's key (an action that asks
before its transition, outside the transaction the others hold the job in): every run it
matches is settled by what the lookup answered, once, with one record carrying the job's
mark."""

import pytest
from django.contrib.auth.models import Group, Permission, User

from approvals.bulk import bulk_progress, marked, run_bulk_job, start_bulk_job
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.models import Step, StepStatus
from runs.reads.selectors import RunFilters
from tests.factories import new_run, place
from tests.workflows import script

# Committed as a worker commits: no test transaction around the job.
pytestmark = pytest.mark.django_db(transaction=True)

UNKNOWN = {"fetch": "succeeded", "classify": "succeeded", "create-task": "unknown"}


def test_a_reconcile_job_settles_each_run_by_its_key():
    ensure_roles(Group, Permission)
    olga = User.objects.create_user("olga")
    olga.groups.add(Group.objects.get(name="operators"))
    script.reset()
    done, absent = (place(new_run(), status="attention", attention_reason="unknown_outcome",
                          step_statuses=UNKNOWN) for _ in range(2))
    # The tracker holds the task of the first run's key, none of the second's.
    script.effects[Step.objects.get(run=done, name="create-task").idempotency_key] = "task-7"
    job, _ = start_bulk_job("reconcile", RunFilters(status="attention"), user=olga,
                            reason="tracker checked", params={"step": "create-task"})

    assert run_bulk_job(job.pk).status == "done"

    assert bulk_progress(job.pk).counts == {"done": 2}
    assert Step.objects.get(run=done, name="create-task").status == StepStatus.SUCCEEDED
    assert Step.objects.get(run=absent, name="create-task").status == StepStatus.FAILED
    assert len(script.reconcile_calls) == 2
    for run in (done, absent):
        assert AuditRecord.objects.filter(run=run, reason=marked(job.reason, job.pk)) \
            .count() == 1
