"""`manage.py audit_checkpoint write FILE` and `check FILE` work on the embedded SQLite
database `make demo` runs on, as on PostgreSQL: the time a checkpoint is taken is read from
the database's clock through Django's Now(), not with a function only PostgreSQL has (which
SQLite refused, and the command then said the database could not be reached)."""

import subprocess
import sys

from tests.processes import ROOT, child_env


def manage_on_sqlite(tmp_path, *args) -> subprocess.CompletedProcess:
    env = child_env(DATABASE_URL=f"sqlite:///{tmp_path}/demo.sqlite3", VAR_DIR=tmp_path / "var")
    return subprocess.run([sys.executable, str(ROOT / "manage.py"), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def test_a_checkpoint_of_the_demos_database_is_written_and_then_checked(tmp_path):
    (tmp_path / "var").mkdir()
    for command in (["migrate", "--no-input", "-v0"],
                    ["start_run", "customer-onboarding", "tenant-1:c-1", "--input",
                     '{"email": "x@example.com", "name": "X", "plan": "pro"}']):
        done = manage_on_sqlite(tmp_path, *command)
        assert done.returncode == 0, done.stderr
    checkpoint = tmp_path / "heads.jsonl.gz"

    written = manage_on_sqlite(tmp_path, "audit_checkpoint", "write", str(checkpoint))
    assert written.returncode == 0, written.stderr
    assert f"wrote the heads of 1 chain(s) to '{checkpoint}'" in written.stdout

    checked = manage_on_sqlite(tmp_path, "audit_checkpoint", "check", str(checkpoint))
    assert checked.returncode == 0, checked.stderr
    assert "every one of the 1 chain(s) checkpointed at" in checked.stdout
