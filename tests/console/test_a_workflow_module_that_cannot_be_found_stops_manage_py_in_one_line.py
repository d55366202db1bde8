"""A module named in RUNS_EXTRA_WORKFLOW_MODULES that does not exist (a typo, a package not on
the Python path) stops every manage.py command with one line naming the variable and the
module, exit status 2 and no traceback, as a malformed variable does. A workflow module that
exists but fails on an import of its own is its author's error and keeps its traceback."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _check(tmp_path, modules: str):
    return subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, capture_output=True, text=True,
        timeout=120,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "console.settings",
             "RUNS_EXTRA_WORKFLOW_MODULES": modules, "PYTHONPATH": f"{tmp_path}:{ROOT}"})


def test_a_module_that_does_not_exist_is_one_line_and_status_2(tmp_path):
    result = _check(tmp_path, "billing.workflows")

    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        "manage.py: RUNS_EXTRA_WORKFLOW_MODULES names billing.workflows, which cannot be "
        "imported: No module named 'billing'"]


def test_a_package_without_the_named_module_is_one_line_and_status_2(tmp_path):
    (tmp_path / "billing").mkdir()
    (tmp_path / "billing" / "__init__.py").write_text("")

    result = _check(tmp_path, "billing.workflow")

    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        "manage.py: RUNS_EXTRA_WORKFLOW_MODULES names billing.workflow, which cannot be "
        "imported: No module named 'billing.workflow'"]


def test_a_workflow_module_whose_own_import_fails_keeps_its_traceback(tmp_path):
    (tmp_path / "billing").mkdir()
    (tmp_path / "billing" / "__init__.py").write_text("")
    (tmp_path / "billing" / "workflows.py").write_text("import a_library_not_installed\n")

    result = _check(tmp_path, "billing.workflows")

    assert result.returncode != 0
    assert "Traceback" in result.stderr
    assert "No module named 'a_library_not_installed'" in result.stderr
