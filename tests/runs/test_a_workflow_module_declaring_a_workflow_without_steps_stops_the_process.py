"""A workflow module that declares a workflow without steps stops the process that imports
it at startup (runs.apps, once the workflow modules are imported), naming the workflow: a
worker or a web process never starts with a workflow whose runs would complete having done
nothing."""

import subprocess
import sys

from tests.processes import ROOT, child_env

EMPTY_MODULE = """
from runs.definitions.definition import Workflow
from tests.workflows import OrderIn

Workflow("test-no-steps", version=1, input=OrderIn)
"""


def test_a_workflow_module_with_a_workflow_without_steps_stops_django_setup(tmp_path):
    (tmp_path / "workflows_without_steps.py").write_text(EMPTY_MODULE)
    started = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"], cwd=ROOT,
        env=child_env(RUNS_EXTRA_WORKFLOW_MODULES="workflows_without_steps",
                      PYTHONPATH=f"{tmp_path}:{ROOT}",
                      DJANGO_SETTINGS_MODULE="console.settings"),
        capture_output=True, text=True, timeout=60)
    assert started.returncode != 0
    assert ("DefinitionError: workflow test-no-steps v1: declares no steps"
            in started.stderr), started.stderr


def test_the_workflow_modules_of_this_repository_start(tmp_path):
    started = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"], cwd=ROOT,
        env=child_env(RUNS_EXTRA_WORKFLOW_MODULES="tests.workflows,tests.approvals.workflows,"
                                                  "runs.bench_workflows",
                      DJANGO_SETTINGS_MODULE="console.settings"),
        capture_output=True, text=True, timeout=60)
    assert started.returncode == 0, started.stderr
