"""Factories: runs started through the real start_run, then placed in the state a test needs."""

import itertools
from datetime import timedelta

from django.utils import timezone

from audit.chain import Actor
from runs.execution import executor
from runs.machine.transitions import start_run
from runs.models import Run, Step

SYSTEM = Actor.system("test")
_keys = itertools.count(1)


def new_run(workflow="test-orders", *, wake: bool = True, drill: bool = False,
            **input_overrides) -> Run:
    """A run started through start_run; `wake=False` sends no wake-up hint (a run the test
    will place, with a real worker listening); `drill`: a drill run, as the drill kit starts."""
    key = f"order-{next(_keys)}-{timezone.now().timestamp()}"
    data = {"order": key, **input_overrides} if workflow.startswith("test-") else input_overrides
    run, created = start_run(workflow=workflow, business_key=key, input=data, actor=SYSTEM,
                             wake=wake, drill=drill)
    assert created
    return run


def place(run: Run, *, status: str, step_statuses: dict | None = None, **fields) -> Run:
    """Put a run (and some of its steps) into a given state, as if it had got there."""
    Run.objects.filter(pk=run.pk).update(status=status, **fields)
    for name, step_status in (step_statuses or {}).items():
        Step.objects.filter(run=run, name=name).update(status=step_status)
    return Run.objects.get(pk=run.pk)


def advance_once(run: Run) -> Run:
    """One worker pass over the run, as worker "w1", then the run as it is now. (The
    `advance` of tests.agent_runs is another: it passes again until the run stops for
    something other than time.)"""
    executor.advance_run(run.pk, worker="w1")
    run.refresh_from_db()
    return run


def step(run: Run, name: str) -> Step:
    return Step.objects.get(run=run, name=name)


def make_due(run: Run, **match) -> None:
    """Bring a run's wake-up, and its steps' next attempts, forward to a second ago: claims
    read the database's clock, which this process only estimates, so "now" here may still be
    the future there."""
    past = timezone.now() - timedelta(seconds=1)
    if Run.objects.filter(pk=run.pk, **match).update(next_wake_at=past):
        Step.objects.filter(run=run, next_attempt_at__isnull=False).update(next_attempt_at=past)


def drawn(*runs) -> dict:
    """The "seen" fields the runs list draws for `runs` as they are now (a bulk form sends
    one per run ticked): what a person saw of each run."""
    from runs.models import Run

    seqs = dict(Run.objects.filter(pk__in=[getattr(r, "pk", r) for r in runs])
                .values_list("pk", "audit_seq"))
    return {f"seen-{pk}": str(seq) for pk, seq in seqs.items()}
