"""Which runs are archived, what an archive file holds, and what the pass records."""

import gzip
import json

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.utils import timezone

from approvals import requests
from approvals.models import ApprovalRequest, Notification
from archive.archiving import archive_runs
from archive.models import ArchivedRun, ArchiveFile, ArchiveRemoval
from audit.models import AuditRecord
from runs.definitions import definition
from runs.execution import executor
from runs.models import Run, RunEvent, RunStatus, Step
from tests.archive.conftest import age
from tests.factories import new_run

pytestmark = pytest.mark.django_db


def _lines(path):
    with gzip.open(path, "rt") as handle:
        return [json.loads(line) for line in handle]


def _hot(run_ids) -> dict:
    return {"runs": Run.objects.filter(pk__in=run_ids).count(),
            "steps": Step.objects.filter(run_id__in=run_ids).count(),
            "events": RunEvent.objects.filter(run_id__in=run_ids).count(),
            "audit": AuditRecord.objects.filter(run_id__in=run_ids).count()}


def test_finished_runs_past_retention_move_to_an_archive_file_and_leave_the_hot_tables(
        finished_run, archive_dir, capsys):
    runs = [finished_run(days=40) for _ in range(3)]
    ids = [r.pk for r in runs]
    before = _hot(ids)
    assert before["runs"] == 3 and before["steps"] and before["audit"]

    call_command("archive_runs")

    assert _hot(ids) == {"runs": 0, "steps": 0, "events": 0, "audit": 0}
    archive = ArchiveFile.objects.get()
    assert archive.run_count == 3 and archive.record_count == before["audit"]
    assert archive.removal_finished_at is not None and archive.kept_run_ids == []
    assert archive.heads == {str(r.pk): [r.audit_seq, r.audit_head] for r in runs}
    lines = _lines(archive_dir / archive.name)
    assert lines[0]["archive"]["runs"] == 3
    assert set(lines[-1]) == {"seal"} and lines[-1]["seal"]["runs"] == 3
    by_id = {line["run"]["id"]: line for line in lines[1:-1]}
    assert sorted(by_id) == ids
    for run in runs:
        line = by_id[run.pk]
        assert line["run"]["business_key"] == run.business_key
        assert line["run"]["input"] == run.input
        assert [s["name"] for s in line["steps"]] == ["fetch", "classify", "create-task",
                                                      "post-ledger"]
        assert [r["seq"] for r in line["audit"]] == list(range(1, run.audit_seq + 1))
        assert line["audit"][-1]["hash"] == run.audit_head
        assert line["events"]
    tombstones = {t.original_run_id: t for t in ArchivedRun.objects.all()}
    assert sorted(tombstones) == ids
    assert all(t.final_status == RunStatus.COMPLETED and t.archive_file == archive
               for t in tombstones.values())
    assert "archived 3 runs in 1 files" in capsys.readouterr().out


def test_unfinished_runs_and_runs_younger_than_retention_are_never_archived(finished_run):
    young = finished_run(days=29)
    waiting = age(new_run(), days=400, status=RunStatus.WAITING)
    attention = age(new_run(), days=400, status=RunStatus.ATTENTION)
    failed_undo = age(new_run(), days=400, status=RunStatus.COMPENSATION_FAILED)
    queued = age(new_run(), days=400)
    old = finished_run(days=31)

    report = archive_runs(actor="test")

    assert report.runs_removed == 1
    assert not Run.objects.filter(pk=old.pk).exists()
    for run in (young, waiting, attention, failed_undo, queued):
        assert Run.objects.filter(pk=run.pk).exists()
    assert list(ArchivedRun.objects.values_list("original_run_id", flat=True)) == [old.pk]


def test_terminated_and_compensated_runs_are_archived_like_completed_ones():
    terminated = age(new_run(), days=60, status=RunStatus.TERMINATED)
    compensated = age(new_run(), days=60, status=RunStatus.COMPENSATED)

    assert archive_runs(actor="test").runs_removed == 2
    assert dict(ArchivedRun.objects.values_list("original_run_id", "final_status")) == {
        terminated.pk: RunStatus.TERMINATED, compensated.pk: RunStatus.COMPENSATED}


def test_a_workflow_retention_days_overrides_the_setting(finished_run, monkeypatch):
    monkeypatch.setattr(definition.registry.latest("test-saga"), "retention_days", 400)
    monkeypatch.setattr(definition.registry.latest("test-approval"), "retention_days", 2)
    kept_longer = age(new_run("test-saga"), days=100, status=RunStatus.COMPLETED)
    due_sooner = age(new_run("test-approval"), days=3, status=RunStatus.TERMINATED)
    by_setting = finished_run(days=31)
    not_yet = finished_run(days=20)

    archive_runs(actor="test")

    archived = set(ArchivedRun.objects.values_list("original_run_id", flat=True))
    assert archived == {due_sooner.pk, by_setting.pk}
    assert Run.objects.filter(pk__in=[kept_longer.pk, not_yet.pk]).count() == 2


def test_older_than_days_applies_one_retention_to_every_workflow(finished_run, monkeypatch):
    monkeypatch.setattr(definition.registry.latest("test-saga"), "retention_days", 400)
    saga = age(new_run("test-saga"), days=100, status=RunStatus.COMPLETED)
    orders = finished_run(days=100)

    call_command("archive_runs", "--older-than-days", "50")

    assert set(ArchivedRun.objects.values_list("original_run_id", flat=True)) == {
        saga.pk, orders.pk}


def test_a_pass_with_no_eligible_run_writes_no_file(finished_run, archive_dir, capsys):
    finished_run(days=5)
    new_run()

    call_command("archive_runs")

    assert not ArchiveFile.objects.exists()
    assert not archive_dir.exists() or not any(archive_dir.rglob("*.gz"))
    assert "archived 0 runs in 0 files" in capsys.readouterr().out


def test_dry_run_counts_and_changes_nothing(finished_run, archive_dir, capsys):
    runs = [finished_run(days=40) for _ in range(2)]

    call_command("archive_runs", "--dry-run")

    assert "2 runs would be archived" in capsys.readouterr().out
    assert Run.objects.filter(pk__in=[r.pk for r in runs]).count() == 2
    assert not ArchiveFile.objects.exists() and not archive_dir.exists()


def test_runs_are_split_into_files_and_removed_in_small_batches(finished_run):
    runs = [finished_run(days=40) for _ in range(5)]

    call_command("archive_runs", "--batch", "2", "--remove-batch", "1")

    files = list(ArchiveFile.objects.order_by("pk"))
    assert [f.run_count for f in files] == [2, 2, 1]
    # One removal (one transaction) per run with --remove-batch 1.
    assert ArchiveRemoval.objects.count() == 5
    assert not Run.objects.filter(pk__in=[r.pk for r in runs]).exists()


def test_removal_is_recorded_with_who_when_which_file_and_chain_heads(finished_run):
    runs = [finished_run(days=40) for _ in range(2)]

    call_command("archive_runs", "--actor", "ops-anna")

    removal = ArchiveRemoval.objects.get()
    archive = ArchiveFile.objects.get()
    assert removal.archive_file == archive
    assert removal.actor == "archive_runs command (ops-anna)" == archive.created_by
    assert removal.removed_at is not None
    assert removal.heads == {str(r.pk): [r.audit_seq, r.audit_head] for r in runs}
    # The record of the removal is not an audit record of the runs (those are gone).
    assert not AuditRecord.objects.filter(run_id__in=[r.pk for r in runs]).exists()


def test_a_run_that_changed_after_it_was_written_stays_in_the_hot_tables(finished_run,
                                                                          monkeypatch):
    """Between writing the file and removing its runs, an operator may reopen a terminated
    run (or a late result is recorded): its chain head moves, and it is kept."""
    from archive import archiving

    changing, steady = finished_run(days=40), finished_run(days=40)
    write_file = archiving.write_file

    def write_then_change(*args, **kwargs):
        archive = write_file(*args, **kwargs)
        Run.objects.filter(pk=changing.pk).update(audit_seq=changing.audit_seq + 1,
                                                  audit_head="f" * 64)
        return archive

    monkeypatch.setattr(archiving, "write_file", write_then_change)
    report = archive_runs(actor="test")

    assert (report.runs_removed, report.runs_kept) == (1, 1)
    assert Run.objects.filter(pk=changing.pk).exists()
    assert not Run.objects.filter(pk=steady.pk).exists()
    assert ArchiveFile.objects.get().kept_run_ids == [changing.pk]
    assert not ArchivedRun.objects.filter(original_run_id=changing.pk).exists()


def test_approval_requests_and_notifications_go_to_the_archive_with_their_run(archive_dir):
    user = User.objects.create_user("ann", email="ann@example.com")
    user.groups.add(Group.objects.get_or_create(name="approvers")[0])
    run = new_run("test-approval")
    executor.advance_run(run.pk, worker="w1")
    assert requests.open_pending_requests(now=timezone.now()) >= 1
    assert ApprovalRequest.objects.filter(run=run).exists()
    assert Notification.objects.filter(request__run=run).exists()
    age(run, days=40, status=RunStatus.TERMINATED)

    archive_runs(actor="test")

    assert not ApprovalRequest.objects.filter(run_id=run.pk).exists()
    assert not Notification.objects.filter(request__run_id=run.pk).exists()
    line = _lines(archive_dir / ArchiveFile.objects.get().name)[1]
    assert line["approvals"][0]["step_name"] and line["notifications"]


def test_a_recorded_file_whose_removal_was_interrupted_is_finished_by_the_next_pass(
        finished_run, monkeypatch):
    from archive import archiving

    runs = [finished_run(days=40) for _ in range(2)]
    monkeypatch.setattr(archiving, "remove", lambda *a, **k: None)  # the pass dies here
    archive_runs(actor="test")
    assert Run.objects.filter(pk__in=[r.pk for r in runs]).count() == 2
    monkeypatch.undo()

    report = archive_runs(actor="test")

    assert report.runs_removed == 2 and report.files == []
    assert ArchiveFile.objects.get().removal_finished_at is not None


def test_an_agent_steps_turns_and_tool_calls_go_to_the_archive_with_their_run(archive_dir):
    from runs.models import AgentTurn, ToolCall
    from tests.factories import place

    run = place(new_run("test-agent"), status=RunStatus.COMPLETED,
                step_statuses={"assist": "succeeded"})
    step = Step.objects.get(run=run, name="assist")
    now = timezone.now()
    AgentTurn.objects.create(step=step, index=1, content="noting", created_at=now,
                             prompt_tokens=7, completion_tokens=3)
    ToolCall.objects.create(step=step, turn=1, index=0, call_id="c1", tool="write-note",
                            arguments={"text": "hi"}, args_hash="h" * 64, status="succeeded",
                            idempotency_key="k" * 64, remote_ref="NOTE-1", updated_at=now)
    age(run, days=40)

    call_command("archive_runs")

    assert not ToolCall.objects.filter(step__run_id=run.pk).exists()
    (line,) = [x for x in _lines(archive_dir / ArchiveFile.objects.get().name)[1:-1]
               if x["run"]["id"] == run.pk]
    assert [(t["index"], t["content"], t["prompt_tokens"]) for t in line["agent_turns"]] == \
        [(1, "noting", 7)]
    assert [(c["tool"], c["idempotency_key"], c["remote_ref"], c["arguments"])
            for c in line["tool_calls"]] == [("write-note", "k" * 64, "NOTE-1", {"text": "hi"})]
