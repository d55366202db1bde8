"""The workflows `manage.py bench_runtime` runs: registered only where this module is imported
(the bench command, and the worker it starts with RUNS_EXTRA_WORKFLOW_MODULES naming it)."""

from pydantic import BaseModel

from .bench_receiver import RemoteIn, declare_remote_write
from .definitions.definition import Workflow

STEPS = 10
LARGE_RESULT_BYTES = 10 * 1024 * 1024


class BenchIn(BaseModel):
    n: int


noop = Workflow("bench-noop-10", version=1, input=BenchIn)


def _declare_step(i: int):
    """One no-op write step; a factory so each function keeps its own `i`. Write steps take
    the full checkpoint path: the intent in the step's row, the outcome and its record."""

    @noop.write(f"step-{i}")
    def step(ctx):
        return {"step": i, "n": ctx.input.n}

    return step


NOOP_STEPS = [_declare_step(i) for i in range(1, STEPS + 1)]

large = Workflow("bench-result-10mb", version=1, input=BenchIn)


@large.write("produce")
def produce(ctx):
    """A step whose result is 10 MB of JSON (stored as an artifact above the inline limit)."""
    return {"blob": "x" * LARGE_RESULT_BYTES, "n": ctx.input.n}


# One write step to a remote system that answers after a second (runs.bench_receiver): the
# step spends nearly all its time waiting, which a worker in the threads mode overlaps.
remote = Workflow("bench-remote-1s", version=1, input=RemoteIn)
declare_remote_write(remote, "call-remote", owner="bench")

# The same call in each of STEPS steps of one run: a run's start, its wake-up hint and its
# lease are paid once for STEPS calls, as in a workflow that asks a model several times.
remote_steps = Workflow(f"bench-remote-1s-{STEPS}", version=1, input=RemoteIn)
for i in range(1, STEPS + 1):
    declare_remote_write(remote_steps, f"call-remote-{i}", owner="bench")
