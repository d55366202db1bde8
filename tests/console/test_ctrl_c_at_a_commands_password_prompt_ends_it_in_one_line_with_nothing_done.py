"""A person who presses Ctrl-C at a command's password prompt (run_action, dispatch,
schedules, bulk_action start on a terminal, without CLI_PASSWORD) has decided not to act:
the command ends with one line saying no password was given and nothing was done, exit
status 1, no traceback, and the run is as it was. It ended in a KeyboardInterrupt traceback
through getpass (a real process on a real terminal, a pseudo-terminal here)."""

import os
import pty
import select
import sys
import time

import pytest

from audit.models import AuditRecord
from runs.models import Run, RunStatus
from tests.processes import ROOT, child_env

pytestmark = pytest.mark.django_db(transaction=True)

PROMPT = b"password of olga: "


def on_a_terminal(*args, keys: bytes) -> tuple[int, str]:
    """manage.py `args` on a pseudo-terminal, `keys` typed once it asks for the password;
    its exit status and everything it wrote to the terminal."""
    env = child_env()
    env.pop("CLI_PASSWORD", None)  # asked at the prompt, as a person at a terminal is
    pid, terminal = pty.fork()
    if pid == 0:  # the child: the command, its stdin, stdout and stderr the terminal
        os.chdir(ROOT)
        os.execve(sys.executable, [sys.executable, str(ROOT / "manage.py"), *args], env)
    written, typed = b"", False
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([terminal], [], [], 1)
        if not ready:
            continue
        try:
            chunk = os.read(terminal, 4096)
        except OSError:  # the command ended: its side of the terminal is closed
            break
        if not chunk:
            break
        written += chunk
        if PROMPT in written and not typed:
            os.write(terminal, keys)
            typed = True
    _, status = os.waitpid(pid, 0)
    os.close(terminal)
    assert typed, written
    return os.waitstatus_to_exitcode(status), written.decode(errors="replace")


def test_ctrl_c_at_the_prompt_says_no_password_was_given_and_does_nothing(
        operator, stuck_run):
    records = AuditRecord.objects.filter(run=stuck_run).count()
    status, written = on_a_terminal("run_action", str(stuck_run.pk), "terminate", "--user",
                                    "olga", "--reason", "stop it", "--no-color", keys=b"\x03")
    assert status == 1, written
    assert "Traceback" not in written and "KeyboardInterrupt" not in written
    said = [line for line in written.replace(PROMPT.decode(), "").splitlines() if line.strip()]
    assert len(said) == 1, written
    assert "no password given for olga" in said[0] and "nothing was done" in said[0]
    assert Run.objects.get(pk=stuck_run.pk).status == RunStatus.ATTENTION
    assert AuditRecord.objects.filter(run=stuck_run).count() == records
    assert not AuditRecord.objects.filter(actor_label="olga").exists()


def test_the_password_typed_at_the_prompt_still_acts(operator, stuck_run, settings):
    # Hashed as the command's own process (production's hashers) checks it.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    operator.set_password("pw")
    operator.save()
    status, written = on_a_terminal("run_action", str(stuck_run.pk), "terminate", "--user",
                                    "olga", "--reason", "stop it", keys=b"pw\n")
    assert status == 0, written
    assert Run.objects.get(pk=stuck_run.pk).status == RunStatus.TERMINATED
    assert AuditRecord.objects.filter(run=stuck_run, action="terminated").count() == 1
