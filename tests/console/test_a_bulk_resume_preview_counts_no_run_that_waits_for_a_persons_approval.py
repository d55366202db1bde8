"""Resume is refused while a run waits for a person's approval (its approval request decides
it: operator_rules.awaited_approval). The bulk preview asks the same rule, as a filter: such a
run is not counted among those that accept Resume, nor named as held until an effect is
settled, and the count the preview gives is the number of runs the job then resumes."""

import pytest

from approvals.bulk import bulk_preview, bulk_progress, run_bulk_job, start_bulk_job
from runs.models import Run, RunStatus, StepStatus
from runs.reads.selectors import RunFilters
from tests.approvals.conftest import waiting_run
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


def test_a_run_waiting_for_an_approval_is_not_counted_as_one_resume_accepts(operator):
    held = place(new_run(), status=RunStatus.ATTENTION,
                 step_statuses={"create-task": StepStatus.FAILED})
    awaiting = waiting_run()
    assert awaiting.status == RunStatus.WAITING

    preview = bulk_preview("resume", RunFilters(), user=operator)
    assert (preview.matching, preview.may_act, preview.acceptable) == (2, 2, 1)
    assert (preview.held_to_settle, preview.held_named) == (0, ())

    job, _ = start_bulk_job("resume", RunFilters(), user=operator, reason="after the outage")
    run_bulk_job(job.pk)
    assert bulk_progress(job.pk).counts == {"done": 1, "refused": 1}
    assert Run.objects.get(pk=awaiting.pk).status == RunStatus.WAITING
    assert Run.objects.get(pk=held.pk).status == RunStatus.QUEUED
