"""A worker runs a run of many steps (a loop of steps in Python, each reading the one before)
with work in proportion to its steps, not their square. At each step it looked for the row of
the step it had called, for the next step to work and for the result a step asked for by a
pass over the run's rows, and counted the steps done by another: a run of 1,000 steps
executed 47 times the runtime's lines of a run of 100. Now the lease keeps its rows by name
and how far they are done (runs.machine.step_rows), and the steps done are counted on.
Measured by the lines of the runtime's code executed (runs/), not by time."""

import pytest
from pydantic import BaseModel

from runs.definitions.definition import Workflow
from runs.execution import executor
from runs.machine.step_rows import RowIndex
from runs.models import Run, RunStatus, Step
from tests.factories import new_run
from tests.line_counts import lines_of_runtime_code


class LoopIn(BaseModel):
    order: str


def _loop(name: str, steps: int) -> Workflow:
    workflow = Workflow(name, version=1, input=LoopIn)

    def step(i: int):
        def body(ctx):
            if i:
                assert ctx.results[f"s{i - 1}"] == {"i": i - 1}
                assert f"s{i}" not in ctx.results
            return {"i": i}
        return body

    for position in range(steps):
        workflow.write(f"s{position}")(step(position))
    return workflow


SHORT, LONG = _loop("test-steps-short", 100), _loop("test-steps-long", 1000)


def _lines_to_run(workflow: Workflow, steps: int) -> int:
    run = new_run(workflow.name, wake=False)
    status, lines = lines_of_runtime_code(lambda: executor.advance_run(run.pk, worker="w1"))
    assert status == RunStatus.COMPLETED
    run = Run.objects.get(pk=run.pk)
    assert run.steps_done == steps  # counted on, step by step, to the rows' own count
    assert Step.objects.filter(run=run, status="succeeded").count() == steps
    return lines


@pytest.mark.django_db(transaction=True)
def test_ten_times_the_steps_cost_the_worker_about_ten_times_the_work():
    short, long = _lines_to_run(SHORT, 100), _lines_to_run(LONG, 1000)
    # Without the index: 5,690,506 lines against 120,260 (47 times). With it, some 10 times.
    assert long < 13 * short, (short, long)


class Row:
    def __init__(self, name: str, status: str = "pending"):
        self.name, self.status = name, status


def test_a_row_list_changed_in_place_is_answered_as_it_is_now():
    rows = [Row("a", "succeeded"), Row("b"), Row("c")]
    index = RowIndex(rows)
    assert index.named("b") is rows[1]
    assert index.first_not_done() is rows[1]
    replaced = rows[1] = Row("b")  # a row read again in its place
    assert index.named("b") is replaced
    rows.reverse()  # moved: c, b, a
    assert index.named("a") is rows[2] and index.named("c") is rows[0]
    assert index.named("d") is None
    rows[1].status = "succeeded"
    assert index.first_not_done() is rows[2] or index.first_not_done() is None
