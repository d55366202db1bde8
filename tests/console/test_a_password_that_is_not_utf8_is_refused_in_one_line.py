"""A password that is not UTF-8 text (a script's CLI_PASSWORD in Latin-1: the shell hands its
bytes over as lone surrogates) is refused with a line naming it, as a command's other text
is: no traceback from the password hasher, nothing changed, no record naming the person."""

import io

import pytest
from django.core.management import CommandError, call_command

from approvals.models import BulkJob
from audit.models import AuditRecord
from runs.machine import dispatch
from runs.models import ControlRecord, DispatchPause

ACTING = {
    "run_action": lambda run: ["run_action", run.pk, "resume", "--reason", "fixed"],
    "dispatch": lambda run: ["dispatch", "pause", "test-orders", "--reason", "INC-9"],
    "bulk_action start": lambda run: ["bulk_action", "start", "resume", "--status",
                                      "attention", "--reason", "all of them"],
}


@pytest.fixture(autouse=True)
def _fresh_pauses():
    dispatch.forget_cache()
    yield
    dispatch.forget_cache()


@pytest.mark.parametrize("command", ACTING)
def test_a_password_in_latin1_changes_nothing_and_says_why(command, operator, stuck_run,
                                                            monkeypatch, caplog):
    # "pwé" in Latin-1: the é is the byte 0xE9, which is no UTF-8.
    monkeypatch.setenv("CLI_PASSWORD", "pw\udce9")
    with pytest.raises(CommandError, match="the password given for olga .* is not UTF-8 "
                                           "text: give it as UTF-8; nothing was done"):
        call_command(*map(str, ACTING[command](stuck_run)), "--user", "olga",
                     stdout=io.StringIO())
    assert "a password for olga that is not UTF-8 text" in caplog.text
    stuck_run.refresh_from_db()
    assert stuck_run.status == "attention"
    assert not DispatchPause.objects.exists() and not BulkJob.objects.exists()
    assert not AuditRecord.objects.filter(actor_label="olga").exists()
    assert not ControlRecord.objects.filter(actor_label="olga").exists()
