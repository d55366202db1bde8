"""Runs of the demo's invoice-triage agent for the tests that drive one in this process
(against the sandbox over real HTTP: the tests take the live_sandbox fixture)."""

from audit.chain import Actor
from demo.sandbox import faults
from runs.execution import executor
from runs.machine import transitions
from runs.models import Run, RunStatus
from tests.factories import make_due

ACTOR = Actor.system("test")
SMALL = "INV-2001"   # 345.48 EUR: posted without asking anyone
LARGE = "INV-1847"   # 3924.01 EUR: the posting waits for a person's approval


def start_triage(number: str = SMALL, notes: str = "", key: str | None = None) -> Run:
    """Start (without a wake-up hint: the test advances it) a triage of invoice `number`."""
    data = {"tenant": "tenant-42", "invoice_number": number,
            "requester_email": "requester@example.com", "notes": notes}
    run, _ = transitions.start_run(workflow="invoice-triage",
                                   business_key=key or f"tenant-42:{number}", input=data,
                                   actor=ACTOR, wake=False)
    return run


def posting_left_unknown(number: str = SMALL) -> Run:
    """A triage of invoice `number` whose ledger posting was made and timed out, and whose
    three lookups by key failed: the run waits for a person, the call unknown (no longer in
    flight)."""
    faults.add("ledger.post", faults.COMMIT_THEN_TIMEOUT, times=1)
    faults.add("ledger.lookup", faults.UNAVAILABLE, times=3)
    return advance(start_triage(number))


def start_summarised(key: str, *, wake: bool = False) -> Run:
    """Start a triage by the agent whose conversation is summarised past a small context
    budget (test-triage-summarised); `wake`: with a wake-up hint, for a real worker."""
    run, _ = transitions.start_run(
        workflow="test-triage-summarised", business_key=key,
        input={"tenant": "tenant-42", "invoice_number": SMALL,
               "requester_email": "requester@example.com"},
        actor=ACTOR, wake=wake)
    return run


def advance(run: Run, times: int = 10) -> Run:
    """Advance the run as a worker would until it stops for something other than time: a
    retry it waits for is brought forward (a second into the past: claims read the
    database's clock, which this process only estimates)."""
    for _ in range(times):
        executor.advance_run(run.pk, worker="w1")
        run.refresh_from_db()
        if run.status == RunStatus.WAITING and run.next_wake_at is not None:
            make_due(run)
            continue
        if run.status != RunStatus.QUEUED:
            break
    return run
