"""A release that changed a workflow's steps without a new version, or left out a version
runs still use, holds each such run for a person only when it next wakes (weeks later for a
run waiting on an approval, an event or a timer). The same rule is told at the deploy:
`manage.py check --database default` (and migrate, which runs it) warns runs.W001 once per
such version with how many runs are in flight and why, and a worker logs it at its start.
Finished runs and versions the code still fits say nothing."""

import io
import logging
import time

import pytest
from django.core.management import call_command

from runs.definitions.definition import Workflow, registry
from runs.models import Run, RunStatus, Step
from runs.operator.release_check import log_unworkable_versions, unworkable_versions
from tests.factories import new_run, place
from tests.processes import start_worker, stop
from tests.workflows import OrderIn

pytestmark = pytest.mark.django_db
FLOW = "test-released-without-a-version"


def version_one(*steps: str) -> Workflow:
    flow = Workflow(FLOW, version=1, input=OrderIn)
    for name in steps:
        flow.read(name)(lambda ctx: {"done": True})
    return flow


@pytest.fixture
def released():
    """v1 with steps fetch and book, one run of it in flight, one finished; then the code of
    v1 as a release changed it (returned by calling), unregistered at the end."""
    flow = version_one("fetch", "book")
    new_run(FLOW, wake=False)
    place(new_run(FLOW, wake=False), status=RunStatus.COMPLETED)
    changed = []

    def release(*steps: str) -> None:
        registry.unregister(changed.pop() if changed else flow)
        if steps:
            changed.append(version_one(*steps))

    yield release
    if changed:
        registry.unregister(changed.pop())


def checked() -> str:
    out, err = io.StringIO(), io.StringIO()
    call_command("check", "--database", "default", stdout=out, stderr=err)
    return out.getvalue() + err.getvalue()


def test_a_step_added_without_a_new_version_is_told_with_the_runs_it_holds(released):
    assert "runs.W001" not in checked()
    released("fetch", "check-budget", "book")
    said = checked()
    assert "runs.W001" in said and said.count("runs.W001") == 1
    assert f"1 run(s) in flight of {FLOW} v1" in said  # the finished one is not counted
    assert "has step 'check-budget', which this run was started without" in said


def test_a_step_renamed_or_a_version_left_out_is_told(released):
    released("fetch", "post")
    (found,) = unworkable_versions()
    assert (found.workflow, found.version, found.runs) == (FLOW, 1, 1)
    assert "has no step 'book' of this run" in found.problem
    released()  # v1 left out of the release
    (found,) = unworkable_versions()
    assert found.problem == f"{FLOW} v1 is not registered in this worker"


def test_a_worker_logs_it_at_its_start(released, caplog):
    released("fetch", "check-budget", "book")
    with caplog.at_level(logging.WARNING, logger="runs.operator.release_check"):
        log_unworkable_versions()
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith(f"release check: 1 run(s) in flight of {FLOW} v1")


def test_runs_of_two_shapes_are_judged_each(released):
    released("fetch", "check", "book")  # a release changed v1 in place...
    new_run(FLOW, wake=False)           # ...and started a run with its steps
    released("fetch", "book")           # the next release went back
    (found,) = unworkable_versions()
    assert found.runs == 2 and "has no step 'check' of this run" in found.problem


def test_an_oldest_run_being_undone_does_not_hide_a_step_added_under_the_newer(released):
    oldest = Run.objects.filter(workflow_name=FLOW, status=RunStatus.QUEUED).get()
    place(oldest, status=RunStatus.COMPENSATING)  # its undo walks its own rows
    new_run(FLOW, wake=False)
    released("fetch", "book", "post")
    (found,) = unworkable_versions()
    assert found.runs == 2 and "has step 'post', which this run was started without" \
        in found.problem


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("empty_broker")
def test_a_real_worker_says_it_in_its_log_as_it_starts(tmp_path):
    run = new_run(wake=False)  # test-orders, which the worker's code declares
    Step.objects.filter(run=run, position=0).update(name="ghost")  # as an older release named it
    worker = start_worker("release-check", tmp_path)
    try:
        deadline = time.monotonic() + 60
        while "release check:" not in (log := (tmp_path / "release-check.log").read_text()):
            assert worker.poll() is None and time.monotonic() < deadline, log[-2000:]
            time.sleep(0.2)
    finally:
        stop(worker)
    (line,) = [line for line in log.splitlines() if "release check:" in line]
    assert "WARNING" in line and "1 run(s) in flight of test-orders v" in line
    assert "has no step 'ghost' of this run" in line
