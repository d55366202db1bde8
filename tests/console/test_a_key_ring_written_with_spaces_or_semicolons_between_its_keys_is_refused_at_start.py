"""A key ring (ARCHIVE_SIGNING_KEYS, AUDIT_SEAL_KEYS, FIELD_ENCRYPTION_KEYS,
RUNS_EVENT_DIGEST_KEYS) written with a space or a ';' between its entries instead of a comma,
"AUDIT_SEAL_KEYS=s3:A s2:B", was read as ONE key s3 whose secret was "A s2:B": the process
started, and verify_audit said much later that s2 was not held. An entry whose secret holds
whitespace or a ';' (which no random secret and no Fernet key does) is refused at start,
named by its position, never its text, saying entries are separated by commas."""

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


@pytest.mark.parametrize("ring", RINGS)
@pytest.mark.parametrize(("raw", "position", "of"), [
    (f"s3:{NEW} s2:{OLD}", 1, 1),
    (f"s3:{NEW};s2:{OLD}", 1, 1),
    (f"s3:{NEW} ; s2:{OLD}", 1, 1),
    (f"s3:{NEW}\ts2:{OLD}", 1, 1),
    (f"s4:{NEW},s3:{NEW[::-1]} s2:{OLD}", 2, 2),
])
def test_keys_separated_by_a_space_or_a_semicolon_are_refused_by_the_entrys_position(
        ring, raw, position, of):
    with pytest.raises(ImproperlyConfigured) as refused:
        key_ring(ring, raw, "test")
    message = str(refused.value)
    assert message.startswith(f"{ring}: entry {position} (of {of}, comma-separated) has "
                              "whitespace or a ';' in its secret: entries are separated by "
                              "commas")
    assert "\n" not in message
    assert NEW not in message and OLD not in message and NEW[::-1] not in message


def test_secrets_as_they_are_made_are_taken():
    # Fernet keys (url-safe base64, '=' padded) and random characters, with room around the
    # commas.
    assert key_ring("FIELD_ENCRYPTION_KEYS", f"f2:{NEW} , f1:{OLD}", "test") == {
        "f2": NEW, "f1": OLD}
    random = "Gk7-_x!@#$%^&*()+=[]{}|:<>?/.~`'\"" + "q" * 16
    assert key_ring("AUDIT_SEAL_KEYS", f"h1:{random}", "test") == {"h1": random}


def test_manage_py_stops_at_start_in_one_line_naming_the_ring():
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, capture_output=True, text=True,
        timeout=120, env={**os.environ, "DJANGO_SETTINGS_MODULE": "console.settings",
                          "AUDIT_SEAL_KEYS": f"s3:{NEW} s2:{OLD}"})

    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "AUDIT_SEAL_KEYS: entry 1 (of 1, comma-separated) has whitespace or a ';'" in line
    assert NEW not in line and OLD not in line
