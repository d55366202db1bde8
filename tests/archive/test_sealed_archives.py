"""An archive file verifies on its own, under any name: every part of each run is sealed
with a key its holder does not have, and the file is sealed as a whole. Each tampered copy
below is saved under a new name (no record of it in the database) and must fail naming
the run and what differs."""

import gzip
import json
import shutil
from datetime import datetime

import pytest
from django.core.management import CommandError, call_command

from archive.models import ArchiveFile
from audit.chain import record_hash
from audit.seals import digest
from tests.archive.conftest import age
from tests.archived_runs import agent_run_with_a_tool_call

pytestmark = pytest.mark.django_db

AMOUNT = "1410.47"


@pytest.fixture
def archived(finished_run, archive_dir):
    """An archive of an ordinary run and an agent run with a tool call: (path, ids)."""
    plain = finished_run(days=40)
    agent = agent_run_with_a_tool_call(said="posting",
                                       arguments={"text": "post", "amount": AMOUNT})
    age(agent, days=40)
    call_command("archive_runs")
    return archive_dir / ArchiveFile.objects.get().name, plain.pk, agent.pk


def _read(path) -> list[dict]:
    with gzip.open(path, "rt") as handle:
        return [json.loads(line) for line in handle]


def _copy(lines, tmp_path, name="renamed-copy.jsonl.gz"):
    target = tmp_path / "elsewhere" / name
    target.parent.mkdir(exist_ok=True)
    with gzip.open(target, "wt") as handle:
        handle.writelines(json.dumps(line) + "\n" for line in lines)
    return target


def _verify(path) -> str:
    """verify_audit --archive: its error (it must fail)."""
    with pytest.raises(CommandError) as failed:
        call_command("verify_audit", "--archive", str(path))
    return str(failed.value)


def _line(lines, run_id) -> dict:
    return next(x for x in lines if x.get("run", {}).get("id") == run_id)


def _rechain(line) -> None:
    """Recompute every record's hash and the run's head, as anyone with the file can."""
    prev = "0" * 64
    for record in line["audit"]:
        record["prev_hash"] = prev
        content = {k: record[k] for k in (
            "run_id", "seq", "action", "step_name", "actor_kind", "actor_label",
            "actor_user_id", "reason", "before", "after", "data")}
        record["hash"] = prev = record_hash(
            prev_hash=prev, created_at=datetime.fromisoformat(record["created_at"]), **content)
    line["run"]["audit_seq"] = line["audit"][-1]["seq"]
    line["run"]["audit_head"] = line["audit"][-1]["hash"]


def _reseal_digests(line) -> None:
    """Recompute the seal's digests (but not its MAC: the key is not in the file)."""
    line["seal"]["digests"] = {k: digest(v) for k, v in line.items() if k != "seal"}


def test_an_untouched_copy_under_another_name_verifies_from_the_file_alone(archived,
                                                                           tmp_path, capsys):
    path, plain, agent = archived
    copy = tmp_path / "copy-of-it.jsonl.gz"
    shutil.copy(path, copy)

    call_command("verify_audit", "--archive", str(copy))

    assert "all chains intact" in capsys.readouterr().out


def test_a_changed_run_input_fails_naming_the_run(archived, tmp_path):
    path, plain, agent = archived
    lines = _read(path)
    _line(lines, plain)["run"]["input"]["order"] = "someone-else's order"

    error = _verify(_copy(lines, tmp_path))

    assert f"run {plain}: run differ from what was sealed" in error


def test_a_changed_tool_call_amount_fails_naming_the_run_and_its_tool_calls(archived,
                                                                             tmp_path):
    path, plain, agent = archived
    lines = _read(path)
    call = _line(lines, agent)["tool_calls"][0]
    assert call["arguments"]["amount"] == AMOUNT
    call["arguments"]["amount"] = "14.10"

    error = _verify(_copy(lines, tmp_path))

    assert f"run {agent}: tool_calls differ from what was sealed" in error
    assert f"run {plain}" not in error


def test_the_last_audit_record_removed_and_the_head_fixed_fails(archived, tmp_path):
    path, plain, agent = archived
    lines = _read(path)
    line = _line(lines, plain)
    line["audit"].pop()
    line["run"]["audit_seq"] = line["audit"][-1]["seq"]
    line["run"]["audit_head"] = line["audit"][-1]["hash"]

    error = _verify(_copy(lines, tmp_path))

    assert f"run {plain}: audit, run differ from what was sealed" in error
    assert "audit chain" not in error  # the chain itself verifies: only the seal tells


def test_a_reason_rewritten_with_every_hash_and_digest_recomputed_fails(archived, tmp_path):
    path, plain, agent = archived
    lines = _read(path)
    line = _line(lines, plain)
    line["audit"][-1]["reason"] = "approved by the CFO"
    _rechain(line)
    _reseal_digests(line)

    error = _verify(_copy(lines, tmp_path, name="approved-by-cfo.jsonl.gz"))

    assert f"run {plain}: its seal does not verify" in error
    assert f"run {agent}" not in error


def test_a_run_removed_or_the_file_cut_short_fails(archived, tmp_path):
    path, plain, agent = archived
    lines = _read(path)

    without_run = [x for x in lines if x.get("run", {}).get("id") != agent]
    assert "runs were removed or added" in _verify(_copy(without_run, tmp_path, "a.jsonl.gz"))
    cut_short = lines[:-2]
    assert "no seal line" in _verify(_copy(cut_short, tmp_path, "b.jsonl.gz"))
    raw = path.read_bytes()
    truncated = tmp_path / "truncated.jsonl.gz"
    truncated.write_bytes(raw[: len(raw) // 2])
    assert "cannot be read" in _verify(truncated)


def test_keys_rotate_by_id_and_an_unknown_key_fails(archived, tmp_path, settings):
    path, plain, agent = archived
    (old_id, old_secret), = settings.ARCHIVE_SIGNING_KEYS.items()
    copy = tmp_path / "rotated.jsonl.gz"
    shutil.copy(path, copy)

    # A new signing key in front: the files the old one sealed still verify.
    settings.ARCHIVE_SIGNING_KEYS = {"k2": "a-new-secret-" + "x" * 40, old_id: old_secret}
    call_command("verify_audit", "--archive", str(copy))

    settings.ARCHIVE_SIGNING_KEYS = {"k2": "a-new-secret-" + "x" * 40}
    error = _verify(copy)
    assert f"run {plain} is sealed with key {old_id!r}, which this installation does not" \
        in error

    # A key of the same id but another secret (a forger's): nothing verifies.
    settings.ARCHIVE_SIGNING_KEYS = {old_id: "not-the-secret"}
    assert f"run {agent}: its seal does not verify" in _verify(copy)


def test_a_copy_claiming_the_unsealed_format_verifies_only_against_its_record(archived,
                                                                              tmp_path):
    path, plain, agent = archived
    lines = _read(path)
    lines[0]["archive"]["format"] = 1
    for line in lines:
        line.pop("seal", None)
    lines = [x for x in lines if x]
    _line(lines, plain)["run"]["input"]["order"] = "someone-else's order"

    error = _verify(_copy(lines, tmp_path, "old-format.jsonl.gz"))

    assert "written before archives were sealed" in error
    assert "nothing vouches for its content" in error
