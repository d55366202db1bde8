"""A bulk job's reason is carried by each run's record with the job's mark ("[bulk job N]")
added, and held there to the one length of a person's text: a reason that fits alone but not
with its mark is refused when the job is asked for, saying so, rather than accepted and then
refused on every run."""

import pytest
from django.contrib.auth.models import Group, Permission, User

from approvals.bulk import BulkRefused, marked, run_bulk_job, start_bulk_job
from approvals.models import BulkJob, BulkOutcome
from console.roles import ensure_roles
from runs.machine.storable import PERSON_TEXT_MAX
from runs.models import Run, RunStatus, StepStatus
from runs.reads.selectors import RunFilters
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db

ATTENTION = RunFilters(status=RunStatus.ATTENTION)


@pytest.fixture
def olga(db):
    ensure_roles(Group, Permission)
    user = User.objects.create_user("olga", password="pw")
    user.groups.add(Group.objects.get(name="operators"))
    place(new_run(), status=RunStatus.ATTENTION, step_statuses={"create-task": StepStatus.FAILED})
    return user


def test_a_reason_of_the_full_length_is_refused_before_any_job_is_made(olga):
    with pytest.raises(BulkRefused, match=r"reason: .* with the job's mark"):
        start_bulk_job("terminate", ATTENTION, user=olga, reason="x" * PERSON_TEXT_MAX)
    assert not BulkJob.objects.exists()


def test_a_reason_that_fits_with_its_mark_is_carried_by_every_run(olga):
    job, _ = start_bulk_job("terminate", ATTENTION, user=olga,
                            reason="x" * (PERSON_TEXT_MAX - len(" [bulk job 1000]")))
    assert len(marked(job.reason, job.pk)) <= PERSON_TEXT_MAX
    run_bulk_job(job.pk)
    assert set(BulkOutcome.objects.filter(job=job).values_list("outcome", flat=True)) == {
        "done"}
    assert Run.objects.filter(status=RunStatus.TERMINATED).count() == 1
