"""A DATABASE_URL the project cannot use (not a URL, another database, a bad port, no
database) or a VAR_DIR that cannot be a directory stops every manage.py command, and a Celery
worker or beat, with one line on stderr naming the variable and what is wrong, exit status 2
and no traceback; a password in the URL is never printed."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from console.env import env

ROOT = Path(__file__).resolve().parents[2]


def _check(**environ):
    return subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, capture_output=True, text=True,
        timeout=120,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "console.settings", **environ})


def _one_line(result) -> str:
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize(("url", "problem"), [
    ("nonsense", "DATABASE_URL='nonsense' is not a URL"),
    ("mysql://x", "DATABASE_URL='mysql://x' names a mysql database, and the project runs on "
                  "PostgreSQL or SQLite only"),
    ("postgres://app:hunter2@db.example:99999/durable",
     "DATABASE_URL='postgres://app:***@db.example:99999/durable' has a port that is not a "
     "number from 1 to 65535"),
    ("postgres://app@db.example:five/durable", "has a port that is not a number"),
    # Not percent-encoded, the / ends the host: what follows the : is no port, nor printed.
    ("postgres://app:hunt/er2@db.example/durable", "has a port that is not a number"),
    ("postgres://app@db.example:5432", "names no database"),
])
def test_a_database_url_the_project_cannot_use_is_one_line_and_status_2(url, problem):
    line = _one_line(_check(DATABASE_URL=url))
    assert problem in line
    assert line.startswith("manage.py: environment variable DATABASE_URL=")
    assert "hunt" not in line and "er2" not in line


def test_a_var_dir_naming_a_file_is_one_line_and_status_2(tmp_path):
    a_file = tmp_path / "var"
    a_file.write_text("not a directory")
    line = _one_line(_check(VAR_DIR=str(a_file)))
    assert f"VAR_DIR='{a_file}'" in line and "is a file, not a directory" in line
    inside = _one_line(_check(VAR_DIR=str(a_file / "inside")))
    assert f"VAR_DIR='{a_file / 'inside'}'" in inside and "Not a directory" in inside


def test_a_var_dir_holding_control_characters_is_named_escaped_on_its_one_line(tmp_path):
    # A file named with a terminal's escape, a line break and a bell: printed raw, the escape
    # recoloured the terminal and the line break forged a second line of the message.
    a_file = tmp_path / "var\x1b[31m\nforged\x07"
    a_file.write_text("not a directory")
    line = _one_line(_check(VAR_DIR=str(a_file)))
    assert "\x1b" not in line and "\x07" not in line
    assert line.count(r"var\x1b[31m\nforged\x07") == 2, line  # VAR_DIR= and the problem
    assert "is a file, not a directory" in line


def test_a_sqlite_url_and_a_new_var_dir_are_taken(tmp_path):
    var = tmp_path / "new" / "var"
    result = _check(DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}", VAR_DIR=str(var))
    assert result.returncode == 0, result.stderr
    assert var.is_dir()


@pytest.mark.parametrize("url", [
    "postgres://postgres@127.0.0.1:5432/durable", "postgresql://u:p@db.example/durable",
    "postgres:///durable", "postgres://u@db/?service=durable", "sqlite:///var/x.sqlite3",
    "sqlite://:memory:", ""])
def test_the_database_urls_the_project_runs_on_are_taken_as_given(url):
    assert env("DATABASE_URL", environ={"DATABASE_URL": url}) == url


def test_a_refused_database_url_masks_its_password_in_the_exception_too():
    with pytest.raises(ImproperlyConfigured) as refused:
        env("DATABASE_URL", environ={"DATABASE_URL": "postgres://app:s:e@cret@h:0/db"})
    assert "s:e@cret" not in str(refused.value) and "cret" not in str(refused.value)
    assert "postgres://app:***@h:0/db" in str(refused.value)


@pytest.mark.parametrize("program", [["worker", "--pool", "solo"], ["beat"]])
def test_a_celery_worker_or_beat_given_a_bad_database_url_stops_in_one_line(program, tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "celery", "-A", "console", *program], cwd=tmp_path,
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT), "DJANGO_SETTINGS_MODULE": "console.settings",
             "DATABASE_URL": "postgres://app:hunter2@db.example:99999/durable"})
    line = _one_line(result)
    assert line.startswith("celery: environment variable DATABASE_URL=")
    assert "has a port that is not a number from 1 to 65535" in line
    assert "hunter2" not in line
    assert not any(tmp_path.iterdir())  # no beat schedule file, nothing started
