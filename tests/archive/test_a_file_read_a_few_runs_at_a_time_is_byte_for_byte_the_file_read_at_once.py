"""An archive file's runs are read a few at a time (archive.archiving.RUNS_PER_READ), all in
the one snapshot of the file. The file holds the same bytes as when every run was read at
once: the same header, lines in the same order with the same seals, the same file seal; and
the same heads, counts and finish times are recorded for it. It verifies as before."""

import gzip
import json
import uuid

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.db import transaction
from django.utils import timezone

from api import webhook_cursors
from api.models import WebhookDelivery, WebhookSubscriber
from approvals import requests
from archive import archiving
from archive.models import ArchiveFile
from runs.execution import executor
from runs.models import RunEvent, RunStatus
from tests.archived_runs import agent_run_with_a_tool_call
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db

RECORDED = ("name", "sha256", "size", "run_count", "record_count", "first_finished_at",
            "last_finished_at", "heads")


def _approval_run():
    User.objects.create_user("ann", email="ann@example.com").groups.add(
        Group.objects.get_or_create(name="approvers")[0])
    run = new_run("test-approval")
    executor.advance_run(run.pk, worker="w1")
    requests.open_pending_requests(now=timezone.now())
    return place(run, status=RunStatus.TERMINATED)


@pytest.fixture
def run_ids(finished_run):
    """Seven runs with every part a file holds, the agent's and the approval's in the
    middle: read three at a time, they fall in different reads."""
    agent = agent_run_with_a_tool_call(said="noting", arguments={"text": "hi"})
    runs = [finished_run(), finished_run(), agent, _approval_run(), finished_run(),
            finished_run(), finished_run()]
    subscriber = WebhookSubscriber.objects.create(name="erp", url="https://erp.example/h",
                                                  secret="s" * 40,
                                                  **webhook_cursors.cursors_at_head())
    for run in runs[1], runs[5]:
        WebhookDelivery.objects.create(
            subscriber=subscriber, event=RunEvent.objects.filter(run=run).first(),
            delivery_id=uuid.uuid4(), status="delivered", attempts=1,
            next_attempt_at=timezone.now(), last_status_code=204)
    return sorted(run.pk for run in runs)


def test_a_file_read_three_runs_at_a_time_holds_the_bytes_of_the_file_read_at_once(
        run_ids, archive_dir, monkeypatch, capsys):
    now = timezone.now()
    monkeypatch.setattr(archiving, "RUNS_PER_READ", len(run_ids))
    with transaction.atomic():
        at_once = archiving.write_file(run_ids, actor="test", now=now)
        bytes_at_once = (archive_dir / at_once.name).read_bytes()
        recorded_at_once = {field: getattr(at_once, field) for field in RECORDED}
        # Neither its record nor its file stays: the file read in parts has the same name
        # and digest.
        transaction.set_rollback(True)
    (archive_dir / at_once.name).unlink()

    monkeypatch.setattr(archiving, "RUNS_PER_READ", 3)
    in_parts = archiving.write_file(run_ids, actor="test", now=now)

    assert (archive_dir / in_parts.name).read_bytes() == bytes_at_once
    assert {field: getattr(in_parts, field) for field in RECORDED} == recorded_at_once
    with gzip.open(archive_dir / in_parts.name, "rt") as handle:
        runs = [json.loads(line) for line in handle][1:-1]
    assert [line["run"]["id"] for line in runs] == run_ids
    assert {part for line in runs for part, rows in line.items() if rows} >= {
        "steps", "events", "audit", "agent_turns", "tool_calls", "approvals", "notifications",
        "webhook_deliveries"}
    call_command("verify_audit", "--archive", str(archive_dir / in_parts.name))
    assert "all chains intact" in capsys.readouterr().out
    assert ArchiveFile.objects.get() == in_parts
