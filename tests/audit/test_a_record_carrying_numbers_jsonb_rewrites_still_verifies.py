"""jsonb keeps numbers as PostgreSQL's numeric, not as the text Python wrote: -0.0 comes back
as 0.0, 1e16 as the integer 10000000000000000. A record whose data carries such a number (a
model's tool-call arguments, kept in the tool_call_invalid record) still verifies, as it was
never touched; one changed in the table still does not."""

import json

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from archive.models import ArchiveFile
from audit.access import record_access_change, verify_access_chain
from audit.chain import Actor
from audit.models import AccessRecord, AuditRecord
from runs.agents import agent_loop
from runs.execution import executor
from runs.machine import transitions
from runs.machine.transitions.agent_calls import ModelTurn
from runs.models import RunStatus
from tests.agent_runs import ACTOR
from tests.archive.conftest import age

pytestmark = pytest.mark.django_db

# Each as Python writes it and as jsonb gives it back.
NUMBERS = {"negative_zero": -0.0, "ten_to_the_16": 1e16, "tiny": 1.5e-7,
           "past_a_float": 12345678901234567890.5, "huge": 1e300, "plain": 2.5}


def _asks_once(arguments: str):
    turns = [ModelTurn(content="", tool_calls=[{"id": "c0", "name": "write-note",
                                                "arguments": arguments}])]
    return lambda client, spec, conversation, **kw: turns.pop(0) if turns else ModelTurn(
        content="done", tool_calls=[])


def _run_with_odd_numbers(monkeypatch, script):
    script.reset()
    monkeypatch.setattr(agent_loop, "ask_model", _asks_once(json.dumps(NUMBERS)))
    run, _ = transitions.start_run(workflow="test-agent", business_key="odd-numbers",
                                   input={"order": "o-1"}, actor=ACTOR, wake=False)
    executor.advance_run(run.pk, worker="w1")
    # No "text": the arguments fail the tool's schema and are kept in the record's data.
    invalid = AuditRecord.objects.get(run=run, action="tool_call_invalid")
    assert invalid.data["arguments"]["ten_to_the_16"] == 10**16  # as jsonb gave it back
    return run


def test_a_record_with_numbers_jsonb_rewrites_verifies(monkeypatch, script, capsys):
    _run_with_odd_numbers(monkeypatch, script)
    call_command("verify_audit")
    assert "all chains intact" in capsys.readouterr().out


def test_a_changed_record_still_fails(monkeypatch, script):
    run = _run_with_odd_numbers(monkeypatch, script)
    record = AuditRecord.objects.get(run=run, action="tool_call_invalid")
    with connection.cursor() as cursor:
        # As a person with the table's owner rights would: past the append-only trigger.
        cursor.execute("SET session_replication_role = replica")
        cursor.execute("UPDATE audit_auditrecord SET data = jsonb_set(data, "
                       "'{arguments,plain}', '2.75') WHERE id = %s", [record.pk])
        cursor.execute("SET session_replication_role = origin")
    with pytest.raises(CommandError, match=f"run {run.pk} is broken at .*tool_call_invalid"):
        call_command("verify_audit")


def test_an_access_record_with_such_numbers_verifies():
    record_access_change(action="api_token_scope_changed", subject="token 1",
                         actor=Actor.system("test"), before={}, after=dict(NUMBERS))
    assert verify_access_chain(AccessRecord.objects.order_by("seq")) is None


def test_the_run_archived_verifies_from_its_file(monkeypatch, script, settings, tmp_path,
                                                 capsys):
    settings.VAR_DIR, settings.RUNS_RETENTION_DAYS = tmp_path, 30
    settings.STORAGES = {k: v for k, v in settings.STORAGES.items() if k != "archive"}
    run = _run_with_odd_numbers(monkeypatch, script)
    age(run, days=40, status=RunStatus.COMPLETED)
    call_command("archive_runs")
    call_command("verify_audit", "--archive",
                 str(tmp_path / "archive" / ArchiveFile.objects.get().name))
    assert "all chains intact" in capsys.readouterr().out
