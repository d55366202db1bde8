"""Every command's whole-number option out of its range is refused in the one sentence
(runs.machine.storable.whole_number_in_range): "--X must be a whole number from A to B,
not V", the option named, before anything is read or written: no run, no audit record, no
user or worker row, no archive file. From the command line it ends with exit code 1 and
that one line, never a traceback. Each command used to say it in its own words ("between",
"at least", "a positive whole number", "a finite number above 0", "times" for --times), and
some not at all ("--rounds and --concurrency must be at least 1"). An option that may be a
fraction (bench_runtime --round-seconds) says "a number" for "a whole number"
(runs.machine.storable.number_in_range), nan and inf out of its range too."""

import io
import re

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from archive.models import ArchivedRun, ArchiveFile
from audit.models import AuditRecord
from console.management.commands.bench_console import BULK_RUNS, MOST_REPEAT
from console.management.commands.list_runs import MOST_RUNS_A_PAGE
from demo.sandbox.faults import MOST_TIMES
from demo.sandbox.models import Fault
from runs.definitions.validation import VERSION_MAX
from runs.execution import executor
from runs.management.commands.bench_runtime import COUNTS as BENCH_RUNTIME_COUNTS
from runs.management.commands.bench_runtime import ROUND_SECONDS
from runs.management.commands.seed_scale import MOST_RUNS
from runs.models import Run, RunStatus, Step, Worker
from tests.archive.conftest import age
from tests.factories import new_run
from tests.processes import manage

pytestmark = pytest.mark.django_db

BIGINT = 2**63 - 1

# command, option, least, most (the options of bench_console and seed_scale follow).
RANGES = [
    ("list_runs", "--limit", 1, MOST_RUNS_A_PAGE),
    ("run_history", "--limit", 1, MOST_RUNS_A_PAGE),
    ("archive_runs", "--older-than-days", 0, 36_500),
    ("archive_runs", "--batch", 1, BIGINT),
    ("archive_runs", "--max-runs", 1, BIGINT),
    ("archive_runs", "--remove-batch", 1, BIGINT),
    ("seed_scale", "--runs", 1, MOST_RUNS),
    ("bench_console", "--runs", BULK_RUNS, MOST_RUNS),
    ("bench_console", "--repeat", 1, MOST_REPEAT),
    *[("bench_runtime", option, low, high)
      for option, (low, high) in BENCH_RUNTIME_COUNTS.items()],
    ("recovery_contract", "--workflow-version", 1, VERSION_MAX),
    ("fault", "--times", 1, MOST_TIMES),
]
CASES = [pytest.param(command, option, low, high, given, id=f"{command}{option}={given}")
         for command, option, low, high in RANGES
         for given in (low - 1, high + 1)]
# The arguments a command takes before its options: a run's id is the test's own run.
ARGUMENTS = {"recovery_contract": ["invoice-approval"],
             "fault": ["tracker.create", "unavailable"]}


def _written():
    return (Run.objects.count(), Step.objects.count(), AuditRecord.objects.count(),
            User.objects.count(), Worker.objects.count(), ArchiveFile.objects.count(),
            ArchivedRun.objects.count(), Fault.objects.count())


def refused_writing_nothing(settings, tmp_path, command, *options) -> str:
    """The CommandError `command` with `options` ends in, having asserted that it printed
    nothing and wrote nothing."""
    settings.VAR_DIR = tmp_path  # the archive folder, were a file written
    settings.RUNS_RETENTION_DAYS = 30
    # Finished forty days ago: a pass with its options in range archives it.
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    age(run, days=40)
    before = _written()
    out = io.StringIO()
    args = [str(run.pk)] if command == "run_history" else ARGUMENTS.get(command, [])
    with pytest.raises(CommandError) as refused:
        call_command(command, *args, *options, stdout=out)
    assert out.getvalue() == ""
    assert _written() == before
    assert Run.objects.filter(pk=run.pk).exists()
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]
    return str(refused.value)


@pytest.mark.parametrize(("command", "option", "low", "high", "given"), CASES)
def test_a_count_out_of_range_is_refused_in_one_sentence_and_nothing_is_written(
        settings, tmp_path, command, option, low, high, given):
    said = refused_writing_nothing(settings, tmp_path, command, option, str(given))
    assert re.fullmatch(rf"{option} must be a whole number from {low} to {high}, not "
                        rf"{given}(; [^\n]+)?", said), said


@pytest.mark.parametrize(("given", "shown"), [
    ("0.5", "0.5"), ("0", "0"), ("-1", "-1"), (str(ROUND_SECONDS[1] + 0.5), "3600.5"),
    ("1e300", "1e+300"), ("nan", "nan"), ("inf", "inf"), ("-inf", "-inf")])
def test_a_duration_out_of_range_is_refused_in_the_same_sentence(settings, tmp_path, given,
                                                                shown):
    # Joined by "=": "-inf" on its own reads as an option.
    said = refused_writing_nothing(settings, tmp_path, "bench_runtime",
                                   f"--round-seconds={given}")
    assert said == (f"--round-seconds must be a number from 1 to 3600, not {shown}; nothing "
                    "was done")


def test_a_count_too_long_to_repeat_is_cut_short(settings, tmp_path):
    # whole_number_argument passes up to 4300 digits: the refusal is still one short line.
    said = refused_writing_nothing(settings, tmp_path, "list_runs", "--limit", "9" * 4300)
    assert said == (f"--limit must be a whole number from 1 to {MOST_RUNS_A_PAGE}, not "
                    f"{'9' * 40}... (4300 digits); page on with --after")


def test_from_the_command_line_it_ends_with_exit_code_1_in_one_line():
    process = manage("list_runs", "--limit", str(MOST_RUNS_A_PAGE + 1))
    out, err = process.communicate(timeout=60)
    assert process.returncode == 1
    assert out == ""
    assert err == (f"CommandError: --limit must be a whole number from 1 to {MOST_RUNS_A_PAGE}, "
                   f"not {MOST_RUNS_A_PAGE + 1}; page on with --after\n")
