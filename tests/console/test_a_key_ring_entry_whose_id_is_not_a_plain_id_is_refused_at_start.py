"""A key ring entry (ARCHIVE_SIGNING_KEYS, AUDIT_SEAL_KEYS, FIELD_ENCRYPTION_KEYS,
RUNS_EVENT_DIGEST_KEYS) whose id is not a plain id was taken at start: "k 2:secret" made a key
named "k 2", written beside everything it sealed, and "A k1:B" (a secret pasted before an
entry) made a key whose id held the secret. An id is 1 to 200 letters, digits, '.', '_' or
'-'; any other is refused at start, the entry named by its position, never its text (its id
may hold a secret, and its secret is one)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from console.settings import key_ring

ROOT = Path(__file__).resolve().parents[2]
RINGS = ("ARCHIVE_SIGNING_KEYS", "AUDIT_SEAL_KEYS", "FIELD_ENCRYPTION_KEYS",
         "RUNS_EVENT_DIGEST_KEYS")
NEW = "Zm9vYmFyYmF6cXV4S2V5TWF0ZXJpYWwxMjM0NTY3ODk="
OLD = "b2xkZXJLZXlNYXRlcmlhbF9zdGlsbF92ZXJpZmllcw=="
PASTED = "pastedSecretWithoutItsId0123456789abcdef"
PROBLEM = "has an id that is not a plain id (1 to 200 letters, digits, '.', '_' or '-')"


@pytest.mark.parametrize("ring", RINGS)
@pytest.mark.parametrize(("raw", "position", "of"), [
    (f"k 2:{NEW}", 1, 1),
    (f"k2:{NEW},k\t1:{OLD}", 2, 2),
    (f"{PASTED} k1:{OLD}", 1, 1),
    (f"k2:{NEW},{PASTED};k1:{OLD}", 2, 2),
    (f"k\u00e9:{NEW}", 1, 1),
    (f"k2\x00:{NEW}", 1, 1),
    (f"'k2':{NEW}", 1, 1),
    (f"k/2:{NEW}", 1, 1),
    ("k" * 201 + f":{NEW}", 1, 1),
])
def test_an_entry_whose_id_is_not_plain_is_refused_by_its_position(ring, raw, position, of):
    with pytest.raises(ImproperlyConfigured) as refused:
        key_ring(ring, raw, "test")
    message = str(refused.value)
    assert message == (f"{ring}: entry {position} (of {of}, comma-separated) {PROBLEM}; "
                       "each entry is id:secret")
    assert NEW not in message and OLD not in message and PASTED not in message


def test_an_empty_id_is_still_refused_as_empty():
    with pytest.raises(ImproperlyConfigured, match="entry 1 .* has an empty id"):
        key_ring("AUDIT_SEAL_KEYS", f"  :{NEW}", "test")


def test_plain_ids_as_rotations_name_them_are_taken():
    raw = f" 2025-06.field_key:{NEW} , k1:{OLD}, {'k' * 200}:{NEW[::-1]}"
    assert key_ring("FIELD_ENCRYPTION_KEYS", raw, "test") == {
        "2025-06.field_key": NEW, "k1": OLD, "k" * 200: NEW[::-1]}


@pytest.mark.parametrize("ring", RINGS)
def test_manage_py_stops_at_start_in_one_line_naming_the_ring_and_entry(ring):
    # Each ring of the settings, read through key_ring: one read any other way would take
    # any id.
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, capture_output=True, text=True,
        timeout=120, env={**os.environ, "DJANGO_SETTINGS_MODULE": "console.settings",
                          ring: f"k1:{NEW},k 0:{OLD}"})

    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert f"{ring}: entry 2 (of 2, comma-separated) {PROBLEM}" in line
    assert NEW not in line and OLD not in line
