"""Every command that changes something as --user NAME first has NAME's password (asked
for, or from CLI_PASSWORD): naming a person is not acting as them. Without it, nothing is
changed and no record names them. Commands that only read take the name alone."""

import io
import json

import pytest
from django.core.management import CommandError, call_command

from approvals.models import ApprovalRequest, BulkJob
from audit.models import AuditRecord
from runs.machine import dispatch
from runs.models import ControlRecord, DispatchPause, RunStatus, ScheduleState
from tests.factories import new_run, place

ACTING = {
    "run_action": lambda run: ["run_action", run.pk, "resume", "--reason", "fixed"],
    "dispatch": lambda run: ["dispatch", "pause", "test-orders", "--reason", "INC-9"],
    "schedules": lambda run: ["schedules", "pause", "test-scheduled", "every-minute",
                              "--reason", "freeze"],
    "bulk_action start": lambda run: ["bulk_action", "start", "resume", "--status",
                                      "attention", "--reason", "all of them"],
}


def _call(*args) -> str:
    out = io.StringIO()
    call_command(*map(str, args), stdout=out)
    return out.getvalue()


def _nothing_names_olga() -> bool:
    return (not AuditRecord.objects.filter(actor_label="olga").exists()
            and not ControlRecord.objects.filter(actor_label="olga").exists())


@pytest.fixture(autouse=True)
def _fresh_pauses():
    dispatch.forget_cache()
    yield
    dispatch.forget_cache()


@pytest.mark.parametrize("command", ACTING)
def test_a_wrong_password_changes_nothing_and_names_nobody(command, operator, stuck_run,
                                                          monkeypatch, caplog):
    monkeypatch.setenv("CLI_PASSWORD", "not-olgas")
    with pytest.raises(CommandError, match="wrong password for olga; nothing was done"):
        _call(*ACTING[command](stuck_run), "--user", "olga")
    # The attempt is logged, the password tried is not.
    assert "wrong password for olga" in caplog.text and "not-olgas" not in caplog.text
    stuck_run.refresh_from_db()
    assert stuck_run.status == "attention"
    assert not DispatchPause.objects.exists() and not BulkJob.objects.exists()
    assert not ScheduleState.objects.filter(paused=True).exists()
    assert not ApprovalRequest.objects.exists()
    assert _nothing_names_olga()


@pytest.mark.parametrize("command", ACTING)
def test_with_no_terminal_and_no_password_nothing_is_done(command, operator, stuck_run,
                                                         monkeypatch):
    monkeypatch.delenv("CLI_PASSWORD")
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    with pytest.raises(CommandError, match="no password given for olga"):
        _call(*ACTING[command](stuck_run), "--user", "olga")
    assert not DispatchPause.objects.exists() and not BulkJob.objects.exists()
    assert _nothing_names_olga()


def test_with_the_password_the_command_acts_in_that_persons_name(operator, stuck_run):
    # CLI_PASSWORD is olga's ("pw", tests/console/conftest.py).
    assert "Resume: done" in _call(*ACTING["run_action"](stuck_run), "--user", "olga")
    assert AuditRecord.objects.filter(run=stuck_run, actor_label="olga").exists()
    place(new_run(), status=RunStatus.ATTENTION)  # resumed, stuck_run is no longer one
    job = json.loads(_call(*ACTING["bulk_action start"](stuck_run), "--user", "olga",
                           "--json"))
    assert BulkJob.objects.get(pk=job["job"]).requested_by == operator


def test_reading_asks_for_no_password(operator, stuck_run, monkeypatch):
    monkeypatch.delenv("CLI_PASSWORD")
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert "offered" in _call("run_action", stuck_run.pk, "--user", "olga")
    preview = json.loads(_call("bulk_action", "preview", "resume", "--status", "attention",
                               "--user", "olga", "--json"))
    assert preview["matching"] == 1
    assert json.loads(_call("list_runs", "--user", "olga", "--json"))["runs"]


@pytest.mark.parametrize("command", ACTING)
def test_a_password_that_is_not_utf8_changes_nothing_and_says_why(command, operator, stuck_run,
                                                                  monkeypatch, caplog):
    # A script's CLI_PASSWORD in Latin-1 ("pwé": the é is the byte 0xE9, no UTF-8) reaches
    # the command as a lone surrogate: refused in one line, not by the hasher's traceback.
    monkeypatch.setenv("CLI_PASSWORD", "pw\udce9")
    with pytest.raises(CommandError, match="the password given for olga .* is not UTF-8 "
                                           "text: give it as UTF-8; nothing was done"):
        _call(*ACTING[command](stuck_run), "--user", "olga")
    assert "a password for olga that is not UTF-8 text" in caplog.text
    stuck_run.refresh_from_db()
    assert stuck_run.status == "attention"
    assert not DispatchPause.objects.exists() and not BulkJob.objects.exists()
    assert _nothing_names_olga()
