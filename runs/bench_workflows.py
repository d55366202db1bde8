"""The workflows `manage.py bench_runtime` runs: registered only where this module is imported
(the bench command, and the worker it starts with RUNS_EXTRA_WORKFLOW_MODULES naming it)."""

from pydantic import BaseModel

from .definition import Workflow

STEPS = 10
LARGE_RESULT_BYTES = 10 * 1024 * 1024


class BenchIn(BaseModel):
    n: int


noop = Workflow("bench-noop-10", version=1, input=BenchIn)


def _declare_step(i: int):
    """One no-op write step; a factory so each function keeps its own `i`. Write steps take
    the full checkpoint path: intent, outcome and their audit records."""

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
