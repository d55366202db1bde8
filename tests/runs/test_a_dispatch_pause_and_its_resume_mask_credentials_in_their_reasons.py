"""Why a workflow's dispatch was paused or resumed is kept (the pause's row, the control
record) and shown to everyone who sees the workflow (the console's banner, the API, the CLI's
status): a credential pasted into it is masked before anything keeps it, by the same
function that masks a run action's reason (audit.redaction.redact_text), whoever
the caller."""

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from audit.redaction import redact_text
from runs.machine import dispatch
from runs.models import ControlRecord, DispatchPause
from tests.factories import SYSTEM

pytestmark = pytest.mark.django_db

PAUSED_BECAUSE = "vendor outage INC-4711 secret=S3cr3tValue"
RESUMED_BECAUSE = "vendor back; their password=hunter2 rotated"


@pytest.fixture(autouse=True)
def _fresh_pauses():
    dispatch.forget_cache()
    yield
    dispatch.forget_cache()


def test_a_pause_keeps_its_reason_masked_in_its_row_and_its_record():
    dispatch.pause_dispatch(workflow="test-orders", actor=SYSTEM, reason=PAUSED_BECAUSE)
    pause = DispatchPause.objects.get(workflow_name="test-orders")
    record = ControlRecord.objects.get(action="dispatch_paused")
    assert pause.reason == record.reason == "vendor outage INC-4711 secret=[redacted]"
    assert pause.reason == redact_text(PAUSED_BECAUSE)
    assert "S3cr3tValue" not in dispatch.current_pauses()["test-orders"][0].reason


def test_a_resume_keeps_its_reason_masked_in_its_record():
    dispatch.pause_dispatch(workflow="test-two-systems", system="ledger", actor=SYSTEM,
                            reason="ledger down")
    dispatch.resume_dispatch(workflow="test-two-systems", system="ledger", actor=SYSTEM,
                             reason=RESUMED_BECAUSE)
    record = ControlRecord.objects.get(action="dispatch_resumed")
    assert record.reason == "vendor back; their password=[redacted] rotated"
    assert not ControlRecord.objects.filter(reason__contains="hunter2").exists()


def test_the_cli_pauses_and_shows_the_reason_masked(monkeypatch, capsys):
    monkeypatch.setenv("CLI_PASSWORD", "pw")
    User.objects.create_superuser("operator", password="pw")
    call_command("dispatch", "pause", "test-orders", "--user", "operator",
                 "--reason", PAUSED_BECAUSE)
    call_command("dispatch", "status")
    call_command("dispatch", "status", "--json")
    call_command("dispatch", "resume", "test-orders", "--user", "operator",
                 "--reason", RESUMED_BECAUSE)
    shown = capsys.readouterr().out
    assert "secret=[redacted]" in shown and "S3cr3tValue" not in shown
    assert not ControlRecord.objects.filter(reason__contains="S3cr3tValue").exists()
    assert not ControlRecord.objects.filter(reason__contains="hunter2").exists()
    assert ControlRecord.objects.filter(reason__contains="[redacted]").count() == 2
