"""A database that cannot be reached (down, restarting, a wrong host or port, one that
accepts and never answers) ends a manage.py command with one line on stderr that says so,
exit status 1 and no traceback; the password of the URL is never printed."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.silent_listener import silent_listener

ROOT = Path(__file__).resolve().parents[2]


def _manage(*args, **environ):
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, capture_output=True, text=True,
        timeout=120, env={**os.environ, "DJANGO_SETTINGS_MODULE": "console.settings",
                          **environ})


def _nothing_listens() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # free once closed: nothing listens there


@pytest.mark.parametrize("command", [["list_runs"], ["verify_audit"], ["archive_runs"],
                                     ["migrate", "--check"], ["show_run", "1"]])
def test_a_database_nothing_listens_for_ends_the_command_in_one_line(command):
    url = f"postgres://app:hunter2@127.0.0.1:{_nothing_listens()}/durable"
    result = _manage(*command, DATABASE_URL=url)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"manage.py {command[0]}: the database cannot be reached (")
    assert "check DATABASE_URL and that PostgreSQL is running" in lines[0]
    assert "hunter2" not in result.stderr + result.stdout


def test_a_database_that_accepts_and_never_answers_ends_the_command_within_its_timeout():
    with silent_listener() as port:
        result = _manage("list_runs", DATABASE_URL=f"postgres://app@127.0.0.1:{port}/durable")
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert "manage.py list_runs: the database cannot be reached" in result.stderr


def test_a_database_the_server_does_not_have_is_named_in_the_servers_words(settings):
    db = settings.DATABASES["default"]
    url = f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/no_such_database_here"
    result = _manage("list_runs", DATABASE_URL=url)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert 'database "no_such_database_here" does not exist' in result.stderr
