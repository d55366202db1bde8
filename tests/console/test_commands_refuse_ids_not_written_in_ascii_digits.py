"""A run, request or job id given to a command is read as the API and the console read one
(runs.machine.storable.whole_number): ASCII digits only. int() reads "٣٧" (Arabic-Indic
digits) as 37, so a command given it acted on run 37; now it is refused in one line naming
the argument and what was given, and nothing is done, shown or written."""

import io
import re

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import CommandError, call_command

from approvals.models import (
    ApprovalRequest,
    BulkJob,
    BulkJobStatus,
    BulkOutcome,
    RequestStatus,
)
from audit.models import AuditRecord
from runs.models import Run, RunStatus, StepStatus
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db

ARABIC_INDIC = str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩")


def other_digits(number: int) -> str:
    """`number` in Arabic-Indic digits: what int() reads as `number`."""
    written = str(number).translate(ARABIC_INDIC)
    assert int(written) == number and not written.isascii()
    return written


def refused(name: str, given: str) -> str:
    return (f"^{name} must be a whole number written in digits 0-9, not "
            f"{re.escape(repr(given))}; nothing was done$")


def _call(*args) -> str:
    out = io.StringIO()
    call_command(*map(str, args), stdout=out)
    return out.getvalue()


def _trail() -> tuple:
    return (AuditRecord.objects.count(), ApprovalRequest.objects.count(),
            sorted(Run.objects.values_list("pk", "status", "audit_seq")))


@pytest.fixture
def carl(operator):
    user = User.objects.create_user("carl", password="pw")
    user.groups.add(Group.objects.get(name="operators"))
    return user


@pytest.mark.parametrize("action", ["resume", "cancel", "terminate"])
def test_run_action_on_a_run_named_in_other_digits_does_nothing(operator, stuck_run, action):
    before = _trail()
    given = other_digits(stuck_run.pk)
    with pytest.raises(CommandError, match=refused("run id", given)):
        _call("run_action", given, action, "--reason", "fixed", "--user", "olga")
    assert Run.objects.get(pk=stuck_run.pk).status == RunStatus.ATTENTION
    assert _trail() == before
    assert not AuditRecord.objects.filter(actor_label="olga").exists()


def test_what_a_run_named_in_other_digits_offers_is_not_listed(operator, stuck_run, capsys):
    given = other_digits(stuck_run.pk)
    with pytest.raises(CommandError, match=refused("run id", given)):
        call_command("run_action", given, "--user", "olga")
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("given", ["1_0", "+1", " 1", "²", "one"])
def test_a_run_id_that_int_would_read_or_is_no_number_is_refused_naming_it(operator, given):
    # int() reads the first three as numbers; none is written in the digits 0-9 alone.
    with pytest.raises(CommandError, match=refused("run id", given)):
        _call("run_action", given, "--user", "olga")


def test_a_decision_on_a_request_named_in_other_digits_decides_nothing(operator, carl):
    # A high-impact effect took place: terminating it waits for a second person.
    run = place(new_run(), status=RunStatus.ATTENTION,
                step_statuses={"create-task": StepStatus.SUCCEEDED,
                               "post-ledger": StepStatus.SUCCEEDED})
    _call("run_action", run.pk, "terminate", "--reason", "customer left", "--user", "olga")
    request = ApprovalRequest.objects.get()
    before = _trail()
    given = other_digits(request.pk)
    with pytest.raises(CommandError, match=refused(re.escape("request id (--decide)"), given)):
        _call("run_action", "--decide", given, "--user", "carl")
    request.refresh_from_db()
    assert request.status == RequestStatus.PENDING and request.decided_by_id is None
    assert Run.objects.get(pk=run.pk).status == RunStatus.ATTENTION
    assert _trail() == before
    assert not AuditRecord.objects.filter(actor_label="carl").exists()


@pytest.mark.parametrize("command", [["show_run"], ["run_history"], ["show_run", "--json"],
                                     ["run_history", "--json"]])
def test_a_run_named_in_other_digits_is_not_shown(command, capsys):
    run = new_run(wake=False)
    given = other_digits(run.pk)
    with pytest.raises(CommandError, match=refused("run id", given)):
        call_command(command[0], given, *command[1:])
    assert capsys.readouterr().out == ""


def test_a_history_page_before_a_seq_in_other_digits_is_refused(capsys):
    run = place(new_run(wake=False), status=RunStatus.ATTENTION)
    with pytest.raises(CommandError, match="--before takes the seq a page printed as 'older' "
                                           r"\(1 or more, in digits 0-9\), not '٢'"):
        call_command("run_history", str(run.pk), "--before", "٢")
    assert capsys.readouterr().out == ""


def test_advance_run_leaves_a_run_named_in_other_digits_alone(script):
    run = new_run(wake=False)
    given = other_digits(run.pk)
    with pytest.raises(CommandError, match=refused("run id", given)):
        call_command("advance_run", given)
    after = Run.objects.get(pk=run.pk)
    assert after.status == RunStatus.QUEUED and after.audit_seq == run.audit_seq
    assert script.calls == []  # no remote system was called
    # In ASCII digits the same run is advanced: the refusal is of the writing only.
    call_command("advance_run", str(run.pk))
    assert Run.objects.get(pk=run.pk).status == RunStatus.COMPLETED


@pytest.mark.parametrize("verb", ["run", "show", "cancel"])
def test_a_bulk_job_named_in_other_digits_is_not_run_shown_or_cancelled(operator, verb,
                                                                        capsys):
    place(new_run(), status=RunStatus.COMPLETED)
    _call("bulk_action", "start", "terminate", "--user", "olga", "--workflow", "test-orders",
          "--status", "completed", "--reason", "cleanup")
    job = BulkJob.objects.get()
    capsys.readouterr()
    given = other_digits(job.pk)
    with pytest.raises(CommandError, match=refused("job id", given)):
        call_command("bulk_action", verb, given, "--user", "olga")
    assert capsys.readouterr().out == ""
    job.refresh_from_db()
    assert job.status == BulkJobStatus.RUNNING and job.cancelled_by_id is None
    assert not BulkOutcome.objects.exists()
