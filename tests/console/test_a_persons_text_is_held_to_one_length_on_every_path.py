"""What a person writes for the record (a reason, evidence, a comment) is held to one length,
PERSON_TEXT_MAX, on every path: the console, the CLI and the API (whose schema says the same
number). Longer is refused naming its length and the limit, and nothing is written: no
record, no pause, no change to the run."""

import io

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from api.schemas import ActionIn
from approvals.bulk import BulkRefused, start_bulk_job
from audit.models import AuditRecord
from runs.machine import dispatch
from runs.machine.storable import PERSON_TEXT_MAX
from runs.models import ControlRecord, DispatchPause, Run, RunStatus
from runs.reads.selectors import RunFilters

pytestmark = pytest.mark.django_db

TOO_LONG = "x" * (PERSON_TEXT_MAX + 1)
LIMIT = f"{PERSON_TEXT_MAX + 1:,} characters, at most {PERSON_TEXT_MAX:,}"


@pytest.fixture(autouse=True)
def _fresh_pauses():
    dispatch.forget_cache()
    yield
    dispatch.forget_cache()


def _post(client, run, action, **data):
    data.setdefault("seen", str(Run.objects.get(pk=run.pk).audit_seq))
    return client.post(reverse("console:action", args=[run.pk, action]), data, follow=True)


def _state(run):
    run = Run.objects.get(pk=run.pk)
    return run.status, run.audit_seq, AuditRecord.objects.count()


def test_the_console_refuses_a_reason_one_character_too_long_and_takes_one_at_the_limit(
        client_for, operator, stuck_run):
    client = client_for(operator)
    before = _state(stuck_run)
    response = _post(client, stuck_run, "resume", reason=TOO_LONG)
    assert LIMIT in response.content.decode()
    assert _state(stuck_run) == before
    _post(client, stuck_run, "resume", reason="y" * PERSON_TEXT_MAX)
    assert Run.objects.get(pk=stuck_run.pk).status == RunStatus.QUEUED


def test_the_console_refuses_evidence_too_long(client_for, operator, stuck_run):
    before = _state(stuck_run)
    response = _post(client_for(operator), stuck_run, "reconcile", step="create-task",
                     mode="found", remote_ref="TASK-1", evidence=TOO_LONG, reason="seen")
    assert f"the evidence is {LIMIT}" in response.content.decode()
    assert _state(stuck_run) == before


def test_the_cli_refuses_a_reason_too_long(operator, stuck_run):
    before = _state(stuck_run)
    with pytest.raises(CommandError, match=LIMIT):
        call_command("run_action", str(stuck_run.pk), "resume", "--user", "olga",
                     "--reason", TOO_LONG, stdout=io.StringIO())
    assert _state(stuck_run) == before


def test_a_dispatch_pause_with_a_reason_too_long_pauses_nothing(client_for, operator):
    response = client_for(operator).post("/workflows/test-orders/dispatch/",
                                         {"paused": "1", "reason": TOO_LONG}, follow=True)
    assert LIMIT in response.content.decode()
    assert not DispatchPause.objects.exists() and not ControlRecord.objects.exists()


def test_a_bulk_job_with_a_reason_too_long_is_refused_before_it_starts(operator):
    with pytest.raises(BulkRefused, match=LIMIT):
        start_bulk_job("cancel", RunFilters(), user=operator, reason=TOO_LONG)


def test_the_apis_schema_holds_the_same_limit():
    assert ActionIn.model_json_schema()["properties"]["reason"]["maxLength"] == PERSON_TEXT_MAX


# An escape sequence recolours the terminal that shows the record (show_run, run_history);
# a bidirectional override makes the text read as other text to the second person.
CONTROLS = ["resumed \x1b[31mafter all", "ok \u202eevil", "bell\x07"]


@pytest.mark.parametrize("reason", CONTROLS)
def test_a_reason_with_control_characters_is_refused_on_every_path(
        client_for, operator, stuck_run, reason):
    before = _state(stuck_run)
    response = _post(client_for(operator), stuck_run, "resume", reason=reason)
    assert "text with the control character U+" in response.content.decode()
    with pytest.raises(CommandError, match="text with the control character U+"):
        call_command("run_action", str(stuck_run.pk), "resume", "--user", "olga",
                     "--reason", reason, stdout=io.StringIO())
    with pytest.raises(BulkRefused, match="text with the control character U+"):
        start_bulk_job("cancel", RunFilters(), user=operator, reason=reason)
    assert _state(stuck_run) == before


def test_line_breaks_tabs_and_emoji_are_part_of_a_reason(client_for, operator, stuck_run):
    _post(client_for(operator), stuck_run, "resume",
          reason="vendor fixed it:\n\tticket 12 \U0001f468\u200d\U0001f4bb")
    assert Run.objects.get(pk=stuck_run.pk).status == RunStatus.QUEUED
