"""A head's seal cannot tell a chain set back to an earlier head together with that head's
genuine seal, nor a chain emptied with its head row: verify_audit passes both. A checkpoint
of every head, written to a file kept outside the database (`manage.py audit_checkpoint
write`), tells them later (`audit_checkpoint check`): every head it names must still be in its
chain. The file is sealed, so leaving a run out of it, or naming an older head, shows too."""

import gzip
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from audit.access import AccessAction, record_access_change
from audit.chain import Actor
from audit.head_seals import seal_head
from audit.models import AccessRecord, AuditRecord
from runs.execution import executor
from runs.models import Run, RunStatus
from tests.factories import new_run

pytestmark = pytest.mark.django_db


def as_superuser(*statements):
    """Statements only a superuser switching the append-only triggers off can run."""
    with connection.cursor() as cursor:
        cursor.execute("SET session_replication_role = replica")
        for sql, params in statements:
            cursor.execute(sql, params)
        cursor.execute("SET session_replication_role = origin")


@pytest.fixture
def completed_run():
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    return Run.objects.get(pk=run.pk)


@pytest.fixture
def access_change():
    return record_access_change(action=AccessAction.OBJECT_PERMISSION_GRANTED,
                                subject="workflow orders", actor=Actor.system("admin"),
                                before={}, after={"role": "x"}, reason="onboarding")


def check(path) -> str:
    with pytest.raises(CommandError) as failed:
        call_command("audit_checkpoint", "check", str(path))
    return str(failed.value)


def set_back(run: Run, *, to_seq: int) -> None:
    """What someone who kept an earlier head and its seal (a backup's row) can do without
    the key: remove the records after it and put the old head, with its genuine seal, back."""
    earlier = AuditRecord.objects.get(run=run, seq=to_seq)
    as_superuser(
        ("DELETE FROM audit_auditrecord WHERE run_id = %s AND seq > %s", [run.pk, to_seq]),
        ("UPDATE runs_run SET audit_seq = %s, audit_head = %s, audit_seal = %s WHERE id = %s",
         [to_seq, earlier.hash, seal_head(run.pk, to_seq, earlier.hash), run.pk]))


def test_a_database_that_only_moved_on_passes_its_checkpoint(
        completed_run, access_change, tmp_path, capsys):
    path = tmp_path / "heads.jsonl.gz"
    call_command("audit_checkpoint", "write", str(path))
    assert "wrote the heads of 2 chain(s)" in capsys.readouterr().out
    # The chains move on after the checkpoint: a head it names is still in its chain.
    record_access_change(action=AccessAction.OBJECT_PERMISSION_REVOKED,
                         subject="workflow orders",
                         actor=Actor.system("admin"), before={"role": "x"}, after={},
                         reason="offboarding")
    call_command("audit_checkpoint", "check", str(path))
    assert "every one of the 2 chain(s)" in capsys.readouterr().out


def test_a_run_set_back_to_an_earlier_sealed_head_passes_verify_audit_but_not_its_checkpoint(
        completed_run, tmp_path):
    path = tmp_path / "heads.jsonl.gz"
    call_command("audit_checkpoint", "write", str(path))
    last = completed_run.audit_seq
    assert last > 2

    set_back(completed_run, to_seq=2)

    call_command("verify_audit")  # the seal cannot tell: the head and its seal are genuine
    message = check(path)
    assert f"run {completed_run.pk}: its chain no longer holds record seq={last}" in message
    assert "1 of the 1 chain(s)" in message


def test_an_access_chain_emptied_with_its_head_passes_verify_audit_but_not_its_checkpoint(
        access_change, tmp_path):
    path = tmp_path / "heads.jsonl.gz"
    call_command("audit_checkpoint", "write", str(path))

    as_superuser(("DELETE FROM audit_accessrecord", []),
                 ("DELETE FROM audit_accesschainhead", []))

    call_command("verify_audit")
    assert AccessRecord.objects.count() == 0
    assert "the access chain no longer holds record seq=1" in check(path)


def test_a_record_rewritten_at_a_checkpointed_head_is_named_with_both_hashes(
        completed_run, tmp_path):
    path = tmp_path / "heads.jsonl.gz"
    call_command("audit_checkpoint", "write", str(path))
    seq, old = completed_run.audit_seq, completed_run.audit_head
    as_superuser(("UPDATE audit_auditrecord SET hash = %s WHERE run_id = %s AND seq = %s",
                  ["f" * 64, completed_run.pk, seq]))
    assert (f"run {completed_run.pk}: record seq={seq} has hash ffffffffffff where the "
            f"checkpoint has {old[:12]}") in check(path)


def lines(path) -> list[dict]:
    with gzip.open(path, "rt") as handle:
        return [json.loads(line) for line in handle]


def rewritten(target, entries) -> None:
    with gzip.open(target, "wt") as handle:
        handle.writelines(json.dumps(e, sort_keys=True, separators=(",", ":")) + "\n"
                          for e in entries)


def test_a_checkpoint_with_a_run_left_out_or_an_older_head_is_refused_as_changed(
        completed_run, tmp_path):
    path = tmp_path / "heads.jsonl.gz"
    call_command("audit_checkpoint", "write", str(path))
    header, run_line, end = lines(path)

    left_out = tmp_path / "left-out.jsonl.gz"
    rewritten(left_out, [header, end])
    assert "was changed after it was written" in check(left_out)

    older = tmp_path / "older.jsonl.gz"
    rewritten(older, [header, {**run_line, "seq": 1}, end])
    assert "was changed after it was written" in check(older)

    cut = tmp_path / "cut.jsonl.gz"
    rewritten(cut, [header, run_line])
    assert "has no end line: the file was cut short" in check(cut)


def test_a_checkpoint_sealed_with_a_key_the_installation_does_not_hold_is_named(
        completed_run, tmp_path, settings):
    path = tmp_path / "heads.jsonl.gz"
    settings.AUDIT_SEAL_KEYS = {"elsewhere": "a-key-this-installation-never-had-" + "e" * 20}
    call_command("audit_checkpoint", "write", str(path))
    settings.AUDIT_SEAL_KEYS = {"k1": "the-installations-own-key-" + "k" * 30}
    assert "its checkpoint is sealed with key 'elsewhere'" in check(path)


def test_writing_refuses_a_file_that_exists_and_leaves_it_as_it_was(completed_run, tmp_path):
    path = tmp_path / "heads.jsonl.gz"
    path.write_bytes(b"an earlier checkpoint")
    with pytest.raises(CommandError, match="exists: a checkpoint is never written over"):
        call_command("audit_checkpoint", "write", str(path))
    assert path.read_bytes() == b"an earlier checkpoint"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["heads.jsonl.gz"]


def test_a_file_that_is_no_checkpoint_is_named_without_a_traceback(tmp_path):
    missing = tmp_path / "missing.jsonl.gz"
    assert f"'{missing}' does not exist" in check(missing)
    not_gzip = tmp_path / "plain.txt"
    not_gzip.write_text("hello")
    assert "cannot be read" in check(not_gzip)
    other = tmp_path / "other.jsonl.gz"
    rewritten(other, [{"archive": "x"}])
    assert "is no audit heads checkpoint" in check(other)
