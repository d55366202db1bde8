"""Archived in a separate process, read back after a restart, verified offline, and closed
for good: a start event delivered again for an archived run starts nothing, through
start_run, the start_run command or the API."""

import gzip
import json
import shutil

import pytest
from django.db import connections

from api.tokens import token_create
from approvals.models import ApprovalRequest, Notification
from archive.models import ArchivedRun, ArchiveFile
from audit.chain import Actor
from audit.models import AuditRecord
from runs.execution import sweeper
from runs.machine.errors import RunArchived
from runs.machine.transitions import start_run
from runs.models import Run, RunEvent, Step
from tests.processes import manage, start_worker, stop

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("empty_broker")]


def _run(*args, **env):
    process = manage(*args, **env)
    out, err = process.communicate(timeout=120)
    return process.returncode, out, err


def _counts() -> dict:
    return {model.__name__: model.objects.count()
            for model in (Run, Step, RunEvent, AuditRecord, ApprovalRequest, Notification)}


def _tamper(source, target, run_id: int, seq: int):
    """A copy of an archive with one audit record's reason rewritten (hashes left alone)."""
    with gzip.open(source, "rt") as handle:
        lines = [json.loads(line) for line in handle]
    for line in lines:
        if line.get("run", {}).get("id") == run_id:
            line["audit"][seq - 1]["reason"] = "nothing to see here"
    with gzip.open(target, "wt") as handle:
        handle.writelines(json.dumps(line) + "\n" for line in lines)


def test_archived_runs_survive_a_restart_verify_offline_and_a_redelivered_start_creates_nothing(
        finished_run, archive_dir, tmp_path, client, script):
    runs = [finished_run(days=40) for _ in range(4)]
    keys = {r.pk: (r.workflow_name, r.business_key, r.input) for r in runs}
    effects, calls = dict(script.effects), list(script.calls)
    env = {"VAR_DIR": tmp_path, "RUNS_RETENTION_DAYS": 30}

    code, out, err = _run("archive_runs", **env)
    assert code == 0, err
    assert "archived 4 runs in 1 files" in out
    archive = ArchiveFile.objects.get()
    path = archive_dir / archive.name
    assert path.is_file()

    # The services restart: new database sessions here, a fresh worker process.
    connections.close_all()
    worker = start_worker("after-archive", tmp_path, VAR_DIR=tmp_path)
    try:
        after_archive = _counts()
        assert not Run.objects.filter(pk__in=keys).exists()

        # Verified offline, from the file (and against its record in the database).
        code, out, err = _run("verify_audit", "--archive", str(path), **env)
        assert code == 0, err
        assert "all chains intact" in out and "recorded sha256" in out
        code, out, err = _run("verify_audit", "--archive", archive.name, **env)
        assert code == 0, err

        victim = runs[2]
        _tamper(path, tmp_path / "tampered.jsonl.gz", victim.pk, seq=2)
        code, out, err = _run("verify_audit", "--archive", str(tmp_path / "tampered.jsonl.gz"),
                              **env)
        assert code != 0
        assert f"audit chain of run {victim.pk} is broken at seq=2" in err

        # Every way a start arrives again is answered with the archived run.
        for run_id, (workflow, key, data) in keys.items():
            with pytest.raises(RunArchived) as refused:
                start_run(workflow=workflow, business_key=key, input=data,
                          actor=Actor.system("redelivery"))
            assert refused.value.same_input
            assert refused.value.archived.original_run_id == run_id
            assert archive.name in str(refused.value)
        with pytest.raises(RunArchived) as refused:
            start_run(workflow=workflow, business_key=key, input={**data, "amount": 7},
                      actor=Actor.system("redelivery"))
        assert not refused.value.same_input

        code, out, err = _run("start_run", workflow, key, "--input", json.dumps(data), **env)
        assert code != 0
        assert f"belongs to run {run_id}" in err and archive.name in err

        _, token = token_create(name="erp", workflows=["test-orders"])
        response = client.post("/api/runs", {"workflow": workflow, "business_key": key,
                                             "input": data},
                               content_type="application/json",
                               HTTP_AUTHORIZATION=f"Bearer {token}")
        assert response.status_code == 409
        body = response.json()
        assert body["error"] == "run_archived"
        assert body["archived_run"]["id"] == run_id
        assert body["archived_run"]["archive_file"] == archive.name
        assert body["archived_run"]["same_input"] is True

        # The sweeper finds nothing to wake, and the worker nothing to do.
        report = sweeper.sweep()
        assert (report.expired, report.due, report.requeued) == (0, 0, 0)
        assert _counts() == after_archive
        assert script.effects == effects and script.calls == calls
        assert ArchivedRun.objects.count() == 4
    finally:
        stop(worker)


def test_a_changed_archive_file_fails_its_recorded_sha256(finished_run, archive_dir, tmp_path):
    finished_run(days=40)
    env = {"VAR_DIR": tmp_path, "RUNS_RETENTION_DAYS": 30}
    assert _run("archive_runs", **env)[0] == 0
    archive = ArchiveFile.objects.get()
    path = archive_dir / archive.name
    # Recompressed with the same content: the chains still verify, the file's hash does not.
    original = tmp_path / "original.jsonl.gz"
    shutil.copy(path, original)
    with gzip.open(original, "rb") as src, gzip.open(path, "wb", compresslevel=1) as dst:
        dst.write(src.read())

    code, out, err = _run("verify_audit", "--archive", str(path), **env)

    assert code != 0
    assert f"is not the recorded {archive.sha256[:12]}" in err
