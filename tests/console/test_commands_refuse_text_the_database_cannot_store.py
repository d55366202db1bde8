"""Text the database cannot store (bytes that are not UTF-8, which the shell hands over as a
lone surrogate such as "\\udcff", or a NUL character) given to list_runs, bulk_action,
dispatch or schedules is refused by the option's name, as run_action refuses it
(console.cli.storable_text), before anything is looked up or written. Never a traceback."""

import pytest
from django.core.management import CommandError, call_command

from approvals.models import ApprovalRequest, BulkJob
from audit.models import AuditRecord
from runs.machine import dispatch
from runs.models import ControlRecord, DispatchPause, Run, RunStatus, ScheduleState
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db

UNICODE = "not valid Unicode text"
NUL = "NUL characters cannot be stored"


@pytest.fixture(autouse=True)
def _fresh_pauses():
    dispatch.forget_cache()
    yield
    dispatch.forget_cache()


@pytest.fixture
def finished_runs():
    return [place(new_run(), status=RunStatus.COMPLETED) for _ in range(2)]


def _written() -> tuple:
    """Every row these commands could write, and each run's state."""
    return (BulkJob.objects.count(), ApprovalRequest.objects.count(),
            AuditRecord.objects.count(), DispatchPause.objects.count(),
            ControlRecord.objects.count(), list(ScheduleState.objects.values()),
            sorted(Run.objects.values_list("pk", "status", "audit_seq")))


def _refused(*args) -> str:
    before = _written()
    with pytest.raises(CommandError) as refused:
        call_command(*args)
    assert _written() == before
    return str(refused.value)


@pytest.mark.parametrize(("option", "text", "problem"), [
    ("--search", "\udcff\udcfe", UNICODE),
    # A NUL in --search is the runs list's own rule, in the words of every door (see
    # test_a_runs_list_filter_the_database_cannot_store_or_no_status_is_refused_alike...).
    ("--workflow", "\udcff", UNICODE),
    ("--after", "\udcff", UNICODE),
])
def test_list_runs_refuses_text_it_cannot_search_for_by_the_options_name(
        operator, finished_runs, option, text, problem):
    message = _refused("list_runs", option, text)
    assert message.startswith(f"{option}: {problem}")
    assert message.endswith("give it as UTF-8 text. Nothing was done.")


@pytest.mark.parametrize(("verb", "option", "text", "problem"), [
    ("preview", "--search", "\udcff", UNICODE),
    ("preview", "--workflow", "\udcff", UNICODE),
    ("start", "--reason", "\udcff", UNICODE),
    ("start", "--reason", "done\x00", NUL),
    ("start", "--search", "\udcff", UNICODE),
])
def test_bulk_action_refuses_it_by_the_options_name_and_starts_no_job(
        operator, finished_runs, verb, option, text, problem):
    args = {"--user": "olga", "--workflow": "test-orders", "--status": "completed",
            "--reason": "cleanup", option: text}
    message = _refused("bulk_action", verb, "terminate",
                       *[x for pair in args.items() for x in pair])
    assert message.startswith(f"{option}: {problem}")
    assert message.endswith("Nothing was done.")


@pytest.mark.parametrize("verb", ["pause", "resume"])
@pytest.mark.parametrize(("args", "option", "problem"), [
    (("test-orders", "--reason", "\udcff"), "--reason", UNICODE),
    (("test-orders", "--reason", "INC\x00"), "--reason", NUL),
    (("test-two-systems", "--system", "ledger\udcff", "--reason", "down"), "--system",
     UNICODE),
])
def test_dispatch_refuses_it_by_the_options_name_and_pauses_nothing(operator, verb, args,
                                                                    option, problem):
    message = _refused("dispatch", verb, *args, "--user", "olga")
    assert message.startswith(f"{option}: {problem}")
    assert message.endswith("Nothing was done.")


@pytest.mark.parametrize("verb", ["pause", "resume"])
@pytest.mark.parametrize(("args", "option", "problem"), [
    (("test-scheduled", "every-minute", "--reason", "\udcff"), "--reason", UNICODE),
    (("test-scheduled", "every-minute", "--reason", "freeze\x00"), "--reason", NUL),
])
def test_schedules_refuses_it_by_the_options_name_and_pauses_nothing(operator, verb, args,
                                                                     option, problem):
    message = _refused("schedules", verb, *args, "--user", "olga")
    assert message.startswith(f"{option}: {problem}")
    assert message.endswith("Nothing was done.")


@pytest.mark.parametrize("args", [
    ("dispatch", "pause", "test\udcff"),
    ("schedules", "pause", "test\udcff", "every-minute"),
    ("schedules", "resume", "test-scheduled", "every\udcff"),
])
def test_a_workflow_or_schedule_named_in_such_text_is_refused_before_it_is_looked_up(
        operator, args):
    message = _refused(*args, "--user", "olga", "--reason", "freeze")
    assert UNICODE in message and message.endswith("Nothing was done.")


def test_text_that_is_fine_still_pauses_a_schedule(operator):
    # The same words, storable: the refusal above is the text's, not the command's.
    call_command("schedules", "pause", "test-scheduled", "every-minute", "--user", "olga",
                 "--reason", "freeze – month end")
    assert ScheduleState.objects.get(name="every-minute").paused
