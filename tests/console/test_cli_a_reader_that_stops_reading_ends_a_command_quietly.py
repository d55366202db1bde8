"""A command whose reader stops early (`manage.py show_run 7 | head -1`) ends with exit
status 1 and nothing on stderr: a traceback there would read as the command's failure."""

import subprocess
import sys

from tests.processes import ROOT, child_env


def test_a_command_whose_reader_went_away_ends_without_a_traceback():
    # recovery_contract reads no database: the test needs none.
    command = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "recovery_contract", "invoice-approval"],
        cwd=ROOT, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Closed before the command has started, let alone written its first line.
    command.stdout.close()
    errors = command.stderr.read()
    assert command.wait(timeout=60) == 1
    assert errors == ""


def test_a_command_read_to_the_end_still_succeeds():
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "recovery_contract", "invoice-approval"],
        cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout.startswith("invoice-approval v1")
