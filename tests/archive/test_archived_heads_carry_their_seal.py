"""An archived run's row carries its chain head's seal (audit_seal, audit.head_seals), which
the offline check verifies when the row has one: a copy whose chain was rewritten and whose
file was sealed again (by someone holding ARCHIVE_SIGNING_KEYS but not AUDIT_SEAL_KEYS)
still fails. A file written before heads were sealed has no such column in its rows, and
still verifies on its own seal."""

import gzip
import json
from datetime import datetime

import pytest
from django.core.management import CommandError, call_command

from archive.models import ArchiveFile
from audit import seals
from audit.chain import record_hash
from audit.head_seals import head_seal_problem

pytestmark = pytest.mark.django_db


@pytest.fixture
def archived(finished_run, archive_dir):
    run = finished_run(days=40)
    call_command("archive_runs")
    return archive_dir / ArchiveFile.objects.get().name, run.pk


def _read(path) -> list[dict]:
    with gzip.open(path, "rt") as handle:
        return [json.loads(line) for line in handle]


def _resealed_copy(lines, tmp_path, name) -> str:
    """The lines sealed again with the archive key, as its holder could, saved as `name`."""
    run_seals = []
    for line in lines:
        if "run" in line:
            line["seal"] = seals.seal_run(line["run"]["id"],
                                          {k: v for k, v in line.items() if k != "seal"})
            run_seals.append((line["run"]["id"], line["seal"]["mac"]))
    lines[-1] = {"seal": seals.seal_file(lines[0]["archive"], run_seals)}
    target = tmp_path / "elsewhere" / name
    target.parent.mkdir(exist_ok=True)
    with gzip.open(target, "wt") as handle:
        handle.writelines(json.dumps(line) + "\n" for line in lines)
    return str(target)


def test_an_archived_runs_row_carries_its_heads_seal_and_verifies(archived, capsys):
    path, run_id = archived
    (line,) = [x for x in _read(path) if "run" in x]
    run = line["run"]
    assert run["audit_seq"] == line["audit"][-1]["seq"]
    assert head_seal_problem(run_id, run["audit_seq"], run["audit_head"],
                             run["audit_seal"]) is None
    call_command("verify_audit", "--archive", str(path))
    assert "all chains intact" in capsys.readouterr().out


@pytest.mark.parametrize("seal", ["keep", ""])
def test_a_rewritten_chain_sealed_again_with_the_archive_key_fails_on_its_head(
        archived, tmp_path, seal):
    path, run_id = archived
    lines = _read(path)
    (line,) = [x for x in lines if "run" in x]
    line["audit"][-1]["reason"] = "approved by the CFO"
    prev = "0" * 64
    for record in line["audit"]:
        record["prev_hash"] = prev
        content = {k: record[k] for k in (
            "run_id", "seq", "action", "step_name", "actor_kind", "actor_label",
            "actor_user_id", "reason", "before", "after", "data")}
        record["hash"] = prev = record_hash(
            prev_hash=prev, created_at=datetime.fromisoformat(record["created_at"]), **content)
    line["run"]["audit_head"] = prev
    if seal != "keep":
        line["run"]["audit_seal"] = seal

    copy = _resealed_copy(lines, tmp_path, "rewritten.jsonl.gz")
    with pytest.raises(CommandError) as failed:
        call_command("verify_audit", "--archive", copy)

    error = str(failed.value)
    assert "differ from what was sealed" not in error  # the archive's seals verify
    assert f"run {run_id}: " in error
    assert ("the head's seal does not verify with key 'dev'" in error if seal == "keep"
            else "its head carries no seal" in error)


def test_a_file_written_before_heads_were_sealed_still_verifies(archived, tmp_path, capsys):
    path, run_id = archived
    lines = _read(path)
    for line in lines:
        if "run" in line:
            del line["run"]["audit_seal"]  # the column did not exist
    copy = _resealed_copy(lines, tmp_path, "written-before.jsonl.gz")

    call_command("verify_audit", "--archive", copy)

    assert "all chains intact" in capsys.readouterr().out
