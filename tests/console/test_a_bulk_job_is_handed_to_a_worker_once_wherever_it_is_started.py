"""A bulk job is handed to a worker by its start, once it is committed, whoever starts it:
the console's form, the API or the command line. Before, the console and the API each sent
the hint themselves and a job started from the command line waited for the approvals
sweep. A start refused, or one found again by its mark, hands nothing over."""

import io

import pytest
from celery.signals import before_task_publish
from django.core.management import CommandError, call_command

from approvals.bulk import BulkRefused, start_bulk_job
from approvals.bulk_lease import BULK_JOB_TASK
from approvals.models import BulkJob
from runs.models import RunStatus, StepStatus
from runs.reads.selectors import RunFilters
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


@pytest.fixture
def handed_over():
    """The bulk jobs handed to a worker: read off the broker's publish, as a worker gets it."""
    jobs: list[int] = []

    def publishing(sender=None, body=None, **_):
        if sender == BULK_JOB_TASK:
            jobs.append(body[0][0])

    before_task_publish.connect(publishing, weak=False)
    yield jobs
    before_task_publish.disconnect(publishing)


def _failed():
    return place(new_run(), status=RunStatus.ATTENTION,
                 step_statuses={"create-task": StepStatus.FAILED})


def test_a_job_started_from_the_command_line_is_handed_to_a_worker_once_committed(
        operator, handed_over, django_capture_on_commit_callbacks):
    _failed()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("bulk_action", "start", "terminate", "--user", "olga", "--status",
                     "attention", "--reason", "vendor incident", stdout=io.StringIO())
        assert handed_over == []  # not before the job is committed

    assert handed_over == [BulkJob.objects.get().pk]


def test_a_job_found_again_by_its_mark_is_not_handed_over_twice(
        operator, handed_over, django_capture_on_commit_callbacks):
    _failed()
    filters = RunFilters(status="attention")
    with django_capture_on_commit_callbacks(execute=True):
        job, made = start_bulk_job("terminate", filters, user=operator,
                                   reason="vendor incident", start_key="k" * 32)
        again, made_again = start_bulk_job("terminate", filters, user=operator,
                                           reason="vendor incident", start_key="k" * 32)

    assert (made, made_again, again.pk) == (True, False, job.pk)
    assert handed_over == [job.pk]


def test_a_refused_start_hands_nothing_over(operator, handed_over,
                                           django_capture_on_commit_callbacks):
    _failed()
    with django_capture_on_commit_callbacks(execute=True), \
            pytest.raises((BulkRefused, CommandError)):
        start_bulk_job("terminate", RunFilters(status="attention"), user=operator,
                       reason="x" * 5000)

    assert handed_over == []
    assert not BulkJob.objects.exists()
