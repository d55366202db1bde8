"""Every environment variable is declared once (console.env), the operations guide shows
that table, and malformed or unknown values stop a process with a clear message."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from console.env import BY_NAME, VARIABLES, check_environment, env, markdown_table
from tests.test_settings import PRODUCTION_ENV

ROOT = Path(__file__).resolve().parent.parent
TABLE = re.compile(r"<!-- settings table: generated from console/env.py -->\n(.*?)"
                   r"<!-- end of settings table -->", re.S)
# Where code reads a variable: os.environ.get / setdefault / [...], os.getenv, env("X").
READS = re.compile(r"(?:environ\.get|environ\.setdefault|environ\[|getenv|\benv)\(?\s*"
                   r"""["']([A-Z][A-Z0-9_]+)["']""")


def code_files():
    for folder in ("console", "runs", "api", "approvals", "audit", "archive", "observability",
                   "demo"):
        yield from (ROOT / folder).rglob("*.py")
    yield ROOT / "manage.py"


def test_the_operations_guide_shows_the_table_of_variables_as_declared():
    found = TABLE.search((ROOT / "docs" / "operations.md").read_text())
    assert found, "docs/operations.md has lost its settings table markers"
    assert found.group(1) == markdown_table(), (
        "docs/operations.md's settings table differs from console/env.py: paste "
        "console.env.markdown_table() between the markers")


def test_every_variable_the_code_reads_is_declared_and_every_declared_one_is_read():
    read = {}
    for path in code_files():
        for name in READS.findall(path.read_text()):
            read.setdefault(name, path.relative_to(ROOT))
    undeclared = {n: str(p) for n, p in read.items() if n not in BY_NAME}
    assert not undeclared, f"read but not declared in console/env.py: {undeclared}"
    assert len(BY_NAME) == len(VARIABLES), "a variable is declared twice"
    scripts = (ROOT / "bin" / "demo").read_text()
    unread = [n for n in BY_NAME if n not in read and n not in scripts]
    assert not unread, f"declared in console/env.py but read nowhere: {unread}"
    assert "os.environ" not in (ROOT / "console" / "settings.py").read_text()


def test_values_are_typed_and_a_malformed_one_is_refused_naming_it():
    assert env("RUNS_LEASE_SECONDS", environ={}) == 30.0
    assert env("RUNS_LEASE_SECONDS", environ={"RUNS_LEASE_SECONDS": " 12.5 "}) == 12.5
    assert env("DEBUG", environ={"DEBUG": "Yes"}) is True
    assert env("DEBUG", environ={"DEBUG": "off"}) is False
    assert env("SANDBOX_ENABLED", environ={"SANDBOX_ENABLED": ""}) is False
    assert env("ALLOWED_HOSTS", environ={"ALLOWED_HOSTS": "a.example, ,b.example"}) == [
        "a.example", "b.example"]
    assert env("API_TOKEN_DEFAULT_DAYS", environ={"API_TOKEN_DEFAULT_DAYS": "never"}) is None
    assert env("API_TOKEN_DEFAULT_DAYS", environ={}) == 90
    assert env("MODEL_BASE_URL", "computed", environ={}) == "computed"
    for name, raw, expected in (("RUNS_LEASE_SECONDS", "30s", "is not a number"),
                                ("DB_CONN_MAX_AGE", "1.5", "is not a whole number"),
                                ("DEBUG", "maybe", "is not a flag"),
                                ("LOG_FORMAT", "xml", "is not one of 'plain', 'json'"),
                                ("API_TOKEN_DEFAULT_DAYS", "soon", "days or 'none'")):
        with pytest.raises(ImproperlyConfigured, match=re.escape(expected)) as refused:
            env(name, environ={name: raw})
        assert f"{name}={raw!r}" in str(refused.value)


def test_unknown_variables_that_look_like_ours_are_refused_with_the_closest_name():
    with pytest.raises(ImproperlyConfigured) as refused:
        check_environment({"RUNS_LEASE_SECOND": "30", "PATH": "/bin", "HOME": "/root",
                           "API_RATE_LIMIT": "many"})
    message = str(refused.value)
    assert "unknown environment variable RUNS_LEASE_SECOND (did you mean RUNS_LEASE_SECONDS?)" \
        in message
    assert "API_RATE_LIMIT='many' is not a whole number" in message
    assert "PATH" not in message and "HOME" not in message
    check_environment({"RUNS_LEASE_SECONDS": "30", "PATH": "/bin"})


def _start(settings_module: str, **extra):
    environ = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY",)}
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env={**environ, "DJANGO_SETTINGS_MODULE": settings_module,
             "SECRET_KEY": "k" * 64, **PRODUCTION_ENV, **extra},
        capture_output=True, text=True, timeout=60, cwd=ROOT)


def test_production_refuses_to_start_on_a_misspelt_or_malformed_variable():
    started = _start("console.production")
    assert started.returncode == 0, started.stderr
    typo = _start("console.production", ARCHIVE_RUNS_PER_FLIE="10")
    assert typo.returncode != 0
    assert "unknown environment variable ARCHIVE_RUNS_PER_FLIE (did you mean " \
           "ARCHIVE_RUNS_PER_FILE?)" in typo.stderr
    malformed = _start("console.production", RUNS_RETENTION_DAYS="ninety")
    assert malformed.returncode != 0
    assert "RUNS_RETENTION_DAYS='ninety' is not a whole number" in malformed.stderr
    # The development settings refuse a malformed value too, and ignore unknown names.
    assert "is not a whole number" in _start("console.settings",
                                             RUNS_RETENTION_DAYS="ninety").stderr
    assert _start("console.settings", ARCHIVE_RUNS_PER_FLIE="10").returncode == 0
