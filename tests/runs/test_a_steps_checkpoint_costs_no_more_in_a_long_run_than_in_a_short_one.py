"""A step's checkpoint (its outcome, the next intent, the next step's context) handles the rows
it changes, not every row of the run: a step of a run of hundreds or thousands of steps (a loop
of steps in Python) must cost what a step of a short run costs, or the run is quadratic in its
length. Measured by the memory the worker allocates between one step's call and the next one's
(what a copy of every step row of the run shows), not by time."""

import tracemalloc

import pytest
from pydantic import BaseModel

from runs.definitions.definition import Workflow
from runs.execution import executor
from runs.models import RunStatus, Step
from tests.factories import new_run

MEASURED = 10  # the step measured, in both runs
allocated = {}  # workflow -> bytes allocated at most from step 10's call to step 11's
started = {}


class LoopIn(BaseModel):
    order: str


def _loop(name: str, steps: int) -> Workflow:
    workflow = Workflow(name, version=1, input=LoopIn)

    def step(i: int):
        def body(ctx):
            if i == MEASURED + 1:
                allocated[name] = tracemalloc.get_traced_memory()[1] - started[name]
            if i:
                # Each step reads the one before it, as a loop carrying a value does.
                assert ctx.results[f"s{i - 1}"] == {"i": i - 1}
                assert f"s{i}" not in ctx.results
            if i == MEASURED:
                tracemalloc.reset_peak()
                started[name] = tracemalloc.get_traced_memory()[0]
            return {"i": i}
        return body

    for position in range(steps):
        workflow.read(f"s{position}")(step(position))
    return workflow


SHORT, LONG = _loop("test-loop-short", 20), _loop("test-loop-long", 500)


def _run_through(workflow: Workflow, steps: int) -> None:
    run = new_run(workflow.name, wake=False)
    tracemalloc.start()
    try:
        executor.advance_run(run.pk, worker="w1")
    finally:
        tracemalloc.stop()
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    assert run.steps_done == steps
    assert Step.objects.filter(run=run, status="succeeded").count() == steps


@pytest.mark.django_db(transaction=True)
def test_a_step_of_a_500_step_run_allocates_what_a_step_of_a_short_run_does():
    _run_through(SHORT, 20)
    _run_through(LONG, 500)
    # Copying the run's 500 step rows at each checkpoint cost some 850 kB a step of the long
    # run; a step of either run allocates some 17 kB without that copy.
    assert allocated["test-loop-long"] < allocated["test-loop-short"] + 32 * 1024, allocated
