"""The workflows `manage.py bench_runtime` runs: registered only where this module is imported
(the bench command, and the worker it starts with RUNS_EXTRA_WORKFLOW_MODULES naming it)."""

import threading

import httpx
from pydantic import BaseModel

from .definition import Contract, Found, NotFound, StepResult, Workflow

STEPS = 10
LARGE_RESULT_BYTES = 10 * 1024 * 1024
REMOTE_TIMEOUT_SECONDS = 10.0


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


class RemoteIn(BaseModel):
    n: int
    url: str


# One write step to a remote system that answers after a second (runs.bench_receiver): the
# step spends nearly all its time waiting, which a worker in the threads mode overlaps.
remote = Workflow("bench-remote-1s", version=1, input=RemoteIn)
_client = None
_client_lock = threading.Lock()


def _http():
    """One HTTP client for every thread of the process (httpx clients are thread-safe): a
    client per call would build a TLS context and a connection pool each time."""
    global _client
    with _client_lock:
        if _client is None:
            _client = httpx.Client(timeout=REMOTE_TIMEOUT_SECONDS, limits=httpx.Limits(
                max_connections=None, max_keepalive_connections=1000))
        return _client


@remote.write("call-remote", honours_key=True, lookup_delay=1.0,
              contract=Contract(evidence="effect id", rule="reconcile by key", owner="bench"))
def call_remote(ctx):
    response = _http().post(f"{ctx.input.url}/effects", json={"n": ctx.input.n},
                            headers={"Idempotency-Key": ctx.key})
    response.raise_for_status()
    body = response.json()
    return StepResult(body, remote_ref=body["id"])


@call_remote.reconcile
def find_remote_effect(ctx):
    response = _http().get(f"{ctx.input.url}/effects/{ctx.key}")
    if response.status_code == 404:
        return NotFound()
    response.raise_for_status()
    return Found(response.json()["id"])
