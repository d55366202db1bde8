"""A checkpoint file's seal is whatever its end line holds: one changed to a number, a list,
or a MAC with characters no hex digest has (the lines and their sha256 left right, which
takes no key) is refused by `audit_checkpoint check` with a line saying the seal does not
hold, exit status 1, never a traceback; and the check writes nothing."""

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from audit.head_seals import signing_key_id
from audit.models import AuditRecord
from runs.execution import executor
from runs.models import RunStatus
from tests.factories import new_run

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def checkpoint(tmp_path):
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    path = tmp_path / "heads.jsonl.gz"
    call_command("audit_checkpoint", "write", str(path))
    return path


def with_seal(path: Path, seal) -> Path:
    """The checkpoint at `path` with its end line's seal replaced: its lines and the sha256
    the end line keeps of them stay as they were written."""
    raw = gzip.decompress(path.read_bytes()).splitlines(keepends=True)
    end = json.loads(raw[-1])
    end["end"]["seal"] = seal
    changed = path.with_name(f"changed-{len(list(path.parent.iterdir()))}.jsonl.gz")
    changed.write_bytes(gzip.compress(b"".join(raw[:-1]) + json.dumps(end).encode() + b"\n"))
    return changed


@pytest.mark.parametrize("seal", [5, ["a"], {"mac": "x"}],
                         ids=["a number", "a list", "an object"])
def test_a_seal_that_is_no_text_is_said_to_be_of_no_seals_form(checkpoint, seal):
    changed = with_seal(checkpoint, seal)
    records = AuditRecord.objects.count()
    with pytest.raises(CommandError) as refused:
        call_command("audit_checkpoint", "check", str(changed))
    assert f"'{changed}': its checkpoint's seal is not of the form key-id:mac" in str(
        refused.value)
    assert AuditRecord.objects.count() == records
    assert sorted(p.name for p in checkpoint.parent.iterdir()) == [
        changed.name, "heads.jsonl.gz"]


@pytest.mark.parametrize("mac", ["é" * 64, "\ud800"], ids=["accented", "a lone surrogate"])
def test_a_mac_with_characters_no_hex_digest_has_does_not_verify(checkpoint, mac):
    changed = with_seal(checkpoint, f"{signing_key_id()}:{mac}")
    with pytest.raises(CommandError) as refused:
        call_command("audit_checkpoint", "check", str(changed))
    assert (f"'{changed}': the checkpoint's seal does not verify with key "
            f"{signing_key_id()!r}") in str(refused.value)


def test_the_command_ends_in_one_line_and_status_1(checkpoint, settings):
    changed = with_seal(checkpoint, 5)
    db = settings.DATABASES["default"]
    result = subprocess.run(
        [sys.executable, "manage.py", "audit_checkpoint", "check", str(changed)], cwd=ROOT,
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "DATABASE_URL": f"postgres://{db['USER']}@"
             f"{db['HOST']}:{db['PORT']}/{db['NAME']}"})
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert "seal is not of the form key-id:mac" in result.stderr
