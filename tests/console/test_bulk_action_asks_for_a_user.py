"""bulk_action preview, start, show and cancel act or read as a person: without --user the
command says that --user is required, as run_action's required --user does, not that there
is no user ''; and nothing is looked up or written. run needs nobody (it is a worker's)."""

import pytest
from django.core.management import CommandError, call_command

from approvals.models import BulkJob
from audit.models import AuditRecord
from runs.models import Run, RunStatus
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


@pytest.fixture
def finished_run():
    return place(new_run(), status=RunStatus.COMPLETED)


def _written() -> tuple:
    return (list(BulkJob.objects.values("pk", "status")), AuditRecord.objects.count(),
            sorted(Run.objects.values_list("pk", "status", "audit_seq")))


@pytest.mark.parametrize("args", [
    ("preview", "terminate", "--workflow", "test-orders"),
    ("start", "terminate", "--workflow", "test-orders", "--reason", "cleanup"),
    ("start", "terminate", "--user", "", "--reason", "cleanup"),
])
def test_preview_and_start_without_a_user_say_it_is_required(operator, finished_run, args):
    before = _written()
    with pytest.raises(CommandError, match="^--user is required for preview/start/show/cancel$"):
        call_command("bulk_action", *args)
    assert _written() == before


def test_cancel_without_a_user_says_it_is_required_and_the_job_goes_on(operator,
                                                                       finished_run):
    call_command("bulk_action", "start", "terminate", "--user", "olga", "--workflow",
                 "test-orders", "--status", "completed", "--reason", "cleanup")
    job = BulkJob.objects.get()
    before = _written()
    with pytest.raises(CommandError, match="^--user is required for preview/start/show/cancel$"):
        call_command("bulk_action", "cancel", str(job.pk))
    assert _written() == before


def test_show_without_a_user_says_it_is_required_and_shows_nothing(operator, finished_run,
                                                                   capsys):
    call_command("bulk_action", "start", "terminate", "--user", "olga", "--workflow",
                 "test-orders", "--status", "completed", "--reason", "cleanup")
    capsys.readouterr()
    with pytest.raises(CommandError, match="^--user is required for preview/start/show/cancel$"):
        call_command("bulk_action", "show", str(BulkJob.objects.get().pk))
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("job", ["99999999999999999999", "-1"])
def test_a_job_id_that_is_no_number_a_job_can_have_is_no_job(job):
    with pytest.raises(CommandError, match=f"^no bulk job {job}$"):
        call_command("bulk_action", "show", job, "--user", "olga")


def test_a_job_id_not_written_in_digits_is_refused_naming_it():
    with pytest.raises(CommandError, match="^job id must be a whole number written in digits "
                                           "0-9, not '²'; nothing was done$"):
        call_command("bulk_action", "show", "²", "--user", "olga")
