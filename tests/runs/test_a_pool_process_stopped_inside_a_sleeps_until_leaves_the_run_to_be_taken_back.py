"""A pool process that is stopped (a stop sent to the worker's whole process group, the
hard time limit) while a run's own hook runs (a sleep's until(), an event wait's
correlate(), a step's describe()) is a crash, as it is inside a step's call. billiard turns
the SIGTERM into a SystemExit raised inside the hook; caught as the hook's failure, it held
the run for a person ("its sleep's until() in this worker's code raised SystemExit"), as it
would now fail the step ("its until(input) raised SystemExit"). Now
the process ends with nothing recorded, as in a crash: the run is claimed again (or taken
back when its lease ends) and goes on (real prefork workers)."""

import os
import signal

import pytest

from audit.chain import Actor
from audit.models import AuditRecord
from runs.definitions.definition import registry
from runs.machine.transitions import start_run
from runs.models import Run, RunStatus, Step, StepStatus
from tests.processes import start_worker, stop, until_status, wait_for
from tests.runs.slow_hook import NAME, declare, entered

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("empty_broker")]
LEASE = 10
MODULES = "tests.workflows,tests.runs.slow_hook_workflow"


@pytest.fixture
def slow_hook():
    """The workflow of tests.runs.slow_hook_workflow, declared in this process too."""
    flow = declare()
    yield flow
    registry.unregister(flow)


def test_a_worker_stopped_inside_a_sleeps_until_is_a_crash_not_the_hooks_failure(tmp_path,
                                                                                  slow_hook):
    hold = tmp_path / "hold"
    # The start calls until() with the input too, before anything holds it: it gives a time
    # already passed at once. The worker is held inside it only once the file exists.
    run = start_run(workflow=NAME, business_key="stopped-in-until",
                    input={"hold": str(hold)}, actor=Actor.system("pool-stop-test"))[0]
    entered(str(hold)).unlink()
    hold.touch()
    worker = start_worker("stopped", tmp_path, pool="prefork", RUNS_LEASE_SECONDS=LEASE,
                          RUNS_EXTRA_WORKFLOW_MODULES=MODULES)
    try:
        wait_for(lambda: entered(str(hold)).exists(), timeout=60, interval=0.05,
                 what="the pool process to be inside until()")
        os.killpg(worker.pid, signal.SIGTERM)  # what systemd sends to every process
        worker.wait(timeout=30)
    finally:
        stop(worker)
    run = Run.objects.get(pk=run.pk)
    # Nothing the stopped process did is recorded: the claim that reached the sleep is
    # rolled back with it (queued), or its lease is left to run out (running).
    assert run.status in (RunStatus.QUEUED, RunStatus.RUNNING), (run.status,
                                                                 run.status_message)
    assert not AuditRecord.objects.filter(run_id=run.pk,
                                          action__in=("definition_missing", "attention")).exists()

    hold.unlink()
    replacement = start_worker("replacement", tmp_path, RUNS_LEASE_SECONDS=LEASE,
                               RUNS_EXTRA_WORKFLOW_MODULES=MODULES)
    try:
        run = until_status(run, RunStatus.COMPLETED, RunStatus.ATTENTION, timeout=120)
    finally:
        stop(replacement)
    assert run.status == RunStatus.COMPLETED, (run.status, run.status_message)
    assert Step.objects.get(run=run, name="nap").status == StepStatus.SUCCEEDED
    assert not any("SystemExit" in str(r) for r in AuditRecord.objects.filter(run_id=run.pk)
                   .values_list("reason", "data"))
    assert AuditRecord.objects.filter(run_id=run.pk, action="timer_fired").count() <= 1
    assert AuditRecord.objects.filter(run_id=run.pk, action="completed").count() == 1
