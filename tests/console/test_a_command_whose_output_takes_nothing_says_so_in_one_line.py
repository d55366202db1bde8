"""A manage.py command whose standard output takes nothing ends with one line on stderr
that says so, exit status 1 and no traceback: written to a full disk (`> /dev/full`), it
says its output could not be written and that it may have done its work (an action is done
once, before it prints); started with its output closed (`>&-`), it is refused before it
does anything, where it acted and then ended in a traceback (AttributeError on None), which
read as an action not done. A reader that stops early (`| head`) is another test's: it
still ends quietly (test_cli_a_reader_that_stops_reading_ends_a_command_quietly)."""

import os
import subprocess
import sys

import pytest

from audit.models import AuditRecord
from runs.models import Run, RunStatus
from tests.processes import ROOT, child_env

pytestmark = pytest.mark.django_db(transaction=True)


def manage_py(*args, output=None, closed=False) -> tuple[int, str]:
    """manage.py `args` writing to `output` (a file name), or with its standard output
    closed; its exit status and what it said on stderr."""
    with open(output or os.devnull, "w") as stdout:
        done = subprocess.run(
            [sys.executable, str(ROOT / "manage.py"), *args], cwd=ROOT, env=child_env(),
            stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=120,
            # After the child's descriptors are set up, before it starts: fd 1 closed.
            preexec_fn=(lambda: os.close(1)) if closed else None)
    return done.returncode, done.stderr


def one_line(returncode: int, err: str, command: str) -> str:
    assert returncode == 1, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"manage.py {command}: ")
    return lines[0]


@pytest.fixture
def terminate(operator, stuck_run, settings):
    # Hashed as the command's own process (production's hashers) checks it.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    operator.set_password("pw")
    operator.save()
    return ("run_action", str(stuck_run.pk), "terminate", "--user", "olga", "--reason",
            "stop it")


def test_an_action_written_to_a_full_disk_is_done_once_and_says_its_output_was_lost(
        terminate, stuck_run):
    line = one_line(*manage_py(*terminate, output="/dev/full"), "run_action")
    assert "its output could not be written (No space left on device)" in line
    assert "it may have done its work: look (show_run, list_runs)" in line
    assert Run.objects.get(pk=stuck_run.pk).status == RunStatus.TERMINATED
    assert AuditRecord.objects.filter(run=stuck_run, action="terminated").count() == 1


def test_a_listing_written_to_a_full_disk_says_its_output_was_lost(stuck_run):
    line = one_line(*manage_py("list_runs", output="/dev/full"), "list_runs")
    assert "its output could not be written (No space left on device)" in line


def test_an_action_with_its_output_closed_is_refused_before_it_acts(terminate, stuck_run):
    records = AuditRecord.objects.filter(run=stuck_run).count()
    line = one_line(*manage_py(*terminate, closed=True), "run_action")
    assert "standard output is closed" in line and "nothing was done" in line
    assert Run.objects.get(pk=stuck_run.pk).status == RunStatus.ATTENTION
    assert AuditRecord.objects.filter(run=stuck_run).count() == records
    assert not AuditRecord.objects.filter(actor_label="olga").exists()


def test_an_action_with_somewhere_to_write_still_says_what_it_did(terminate, stuck_run,
                                                                   tmp_path):
    returncode, err = manage_py(*terminate, output=str(tmp_path / "out"))
    assert returncode == 0, err
    assert (tmp_path / "out").read_text().startswith("Terminate: done.")
    assert Run.objects.get(pk=stuck_run.pk).status == RunStatus.TERMINATED
