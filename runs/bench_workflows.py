"""The workflows `manage.py bench_runtime` runs: registered only where this module is imported
(the bench command, and the worker it starts with RUNS_EXTRA_WORKFLOW_MODULES naming it)."""

from pydantic import BaseModel

from .bench_receiver import RemoteIn, look_up_effect, send_effect
from .definitions.definition import Contract, Workflow

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


@remote.write("call-remote", honours_key=True, lookup_delay=1.0,
              contract=Contract(evidence="effect id", rule="reconcile by key", owner="bench"))
def call_remote(ctx):
    return send_effect(ctx)


@call_remote.reconcile
def find_remote_effect(ctx):
    return look_up_effect(ctx)


# The same call in each of STEPS steps of one run: a run's start, its wake-up hint and its
# lease are paid once for STEPS calls, as in a workflow that asks a model several times.
remote_steps = Workflow(f"bench-remote-1s-{STEPS}", version=1, input=RemoteIn)


def _declare_remote_step(i: int):
    @remote_steps.write(f"call-remote-{i}", honours_key=True, lookup_delay=1.0,
                        contract=Contract(evidence="effect id", rule="reconcile by key",
                                          owner="bench"))
    def call(ctx):
        return send_effect(ctx)

    @call.reconcile
    def find(ctx):
        return look_up_effect(ctx)

    return call


REMOTE_STEPS = [_declare_remote_step(i) for i in range(1, STEPS + 1)]
