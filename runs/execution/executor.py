"""The executor: advances one run as far as it can go, checkpointing around every call.

For each step: the intent is committed (step running, attempt counted, lease held), the step
function is called outside any transaction with the step's key, and the outcome is committed
together with the next step's intent. An unknown outcome is reconciled by key before
anything else is sent. The executor decides nothing about state itself: it calls
runs.machine.transitions, which checks and records every move.
"""

import logging
import os
import socket
from functools import partial

from django.db import DatabaseError, connection
from pydantic import ValidationError

from audit import redaction

from ..agents import agent_loop
from ..definitions import definition
from ..error_text import first_line
from ..machine import (
    artifacts,
    crashpoints,
    deadline,
    heartbeats,
    limits,
    lookups,
    sensitive,
    tracing,
    transitions,
)
from ..machine.context import StepContext, build_context, opened_services
from ..machine.errors import Classified
from ..machine.invocation import invoke
from ..machine.logcontext import log_context
from ..machine.step_rows import index_of
from ..models import ErrorClass
from .database_outage import CONNECTION_LOST, unreachable

logger = logging.getLogger(__name__)


def worker_name(pid: int | None = None) -> str:
    """This process's name in leases and audit records (or, given its `pid`, the name of
    another process of this host: a worker's pool process)."""
    return f"{socket.gethostname()}:{pid or os.getpid()}"


def advance_run(run_id: int, *, worker: str | None = None, drill: bool = False) -> str | None:
    """Claim `run_id` and run it until it completes, waits or needs a person; with `drill`,
    a drill run (the drill kit's, runs.operator.drills), and only such a run.

    Returns the run's status afterwards, or None when the run was not claimable (another
    worker holds it, it is not due, or it is final): a duplicate or stale wake-up is harmless.
    """
    worker = worker or worker_name()
    with log_context(run_id=run_id):
        return _advance_claimed(run_id, worker, drill)


def _advance_claimed(run_id: int, worker: str, drill: bool) -> str | None:
    lease = transitions.claim_run(run_id, worker=worker, drill=drill)
    if lease is None:
        return None
    if lease.finished:
        return lease.run.status
    workflow = lease.definition
    try:
        with opened_services(workflow) as services, deadline.calls_bounded(), \
                redaction.values_masked():
            validated_input = lease.validated_input
            while lease.work is not None and not lease.finished:
                step = lease.work
                ctx = build_context(lease.run, lease.steps, step, definition=workflow,
                                    services=services, validated_input=validated_input,
                                    compensating=lease.compensating,
                                    heartbeat=partial(heartbeat, lease),
                                    rows=index_of(lease, lease.steps))
                with log_context(workflow=ctx.workflow, business_key=ctx.business_key,
                                 step=ctx.step, idempotency_key=ctx.key):
                    lease = _work_once(lease, step, lease.spec(step.name), ctx)
    except CONNECTION_LOST as exc:
        if unreachable(exc):
            _hand_back(lease, exc)
        raise
    return lease.run.status


def _hand_back(lease: transitions.Lease, exc: BaseException) -> None:
    """The session this worker held the run on ended under it (killed, a failover, the
    network): what it was about to write is lost with it. Its lease is handed back on a new
    connection at once, rather than left to run out: the step under way is then settled by
    its key, never sent again blindly, by whoever claims the run next (the caller's next
    try, at once). Not when the database cannot be reached: the lease then runs out."""
    connection.close()
    step = lease.work.name if lease.work is not None else ""
    try:
        handed = transitions.hand_back(lease, why=f"its database session ended ({first_line(exc)})")
    except DatabaseError:
        connection.close()
        return
    if handed:
        logger.warning("run %s: its lease is handed back at once, as its database session "
                       "ended under it (%s)%s", lease.run.pk, first_line(exc),
                       f"; step {step} is settled by its key before anything is sent again"
                       if step else "")


def heartbeat(lease: transitions.Lease) -> bool:
    """A long step's ctx.heartbeat(): its lease extended, and with it its deadline."""
    extended = transitions.heartbeat(lease)
    if extended:
        deadline.renew()
        heartbeats.renew_if_held(lease)
    return extended


def _work_once(lease: transitions.Lease, step, spec: definition.StepDef,
               ctx: StepContext) -> transitions.Lease:
    if spec.kind == definition.AGENT:
        # Its tool calls are checkpointed, settled and undone one by one (agent_loop);
        # the step's own outcome (final answer, model error, undo done) is recorded here.
        work = agent_loop.compensate_agent_step if lease.compensating \
            else agent_loop.run_agent_step
        result = work(lease, step, spec, ctx)
        if isinstance(result, transitions.Lease):
            return result
        return transitions.record_outcome(lease, lease.by_name(step.name), result)
    if lease.settle_first:
        with heartbeats.calling(lease):
            verdict, error = ask_remote(spec, ctx)
        logger.info("step %s: outcome unknown; lookup by key: %s", step.name,
                    lookups.verdict_text(verdict))
        return transitions.settle_unknown(lease, step, verdict, error=error)
    point = f"{step.name}:compensate" if lease.compensating else step.name
    crashpoints.reach(crashpoints.BEFORE_CALL, point)
    with heartbeats.calling(lease), \
            tracing.step_span(ctx, kind=spec.kind,
                              what="compensate" if lease.compensating else "step") as span:
        if crashpoints.injected_failure(point):
            outcome = transitions.Outcome(succeeded=False, error=Classified(
                ErrorClass.PERMANENT, f"drill: injected permanent failure of {point}"))
        elif lease.compensating:
            outcome = call_compensation(spec, ctx)
        else:
            # Within its remote system's rate, shared by every worker (runs.machine.limits).
            outcome = limits.call_within_limits(
                spec.system, ctx, lambda: call_step(spec, ctx),
                refused=transitions.Outcome.failure)
        tracing.record_outcome(span, outcome)
    crashpoints.reach(crashpoints.AFTER_CALL, point)
    if outcome.succeeded:
        logger.debug("%s succeeded (attempt %s)", point, ctx.attempt)
    else:
        logger.warning("%s failed (attempt %s): %s: %s", point, ctx.attempt,
                       outcome.error.error_class, outcome.error.message)
    return transitions.record_outcome(lease, step, outcome)


def call_step(spec: definition.StepDef, ctx: StepContext) -> transitions.Outcome:
    """Call a step function and turn whatever happens into a classified Outcome."""
    accept = partial(_decided, spec) if spec.kind == definition.DECISION else None
    outcome = invoke(f"step {spec.name}", "step", spec.fn, ctx, retry=spec.retry,
                     accept=accept)
    if not outcome.succeeded:
        return outcome
    # Sealed before it is stored anywhere: the step's row, an artifact, the archive.
    value = sensitive.seal_fields(outcome.value, spec.sensitive)
    # Kept apart when large, refused past the limit: the one rule of a step's and a tool
    # call's result (artifacts.kept_result).
    value, too_large = artifacts.kept_result(ctx.run_id, ctx.step, value,
                                             has_side_effect=spec.has_side_effect)
    if too_large is not None:
        return transitions.Outcome(succeeded=False, error=too_large)
    return transitions.Outcome(succeeded=True, value=value, remote_ref=outcome.remote_ref)


def _decided(spec: definition.StepDef, value):
    """A decision's output as its schema reads it, or the Outcome that refuses it."""
    try:
        if isinstance(value, str | bytes):
            accepted = spec.schema.model_validate_json(value)
        else:
            accepted = spec.schema.model_validate(value)
    except ValidationError as exc:
        return transitions.Outcome(
            succeeded=False, invalid_output=sensitive.seal_fields(value, spec.sensitive),
            error=Classified(ErrorClass.MODEL_FORMAT,
                             f"output does not match {spec.schema.__name__}: "
                             f"{exc.error_count()} error(s): {_first_error(exc)}"),
        )
    return accepted.model_dump(mode="json")


def call_compensation(spec: definition.StepDef, ctx: StepContext) -> transitions.Outcome:
    """Call a step's compensation (ctx.key is the compensation's own key). What it returns
    is checked as a step's result is: recording what the database refuses would fail the
    checkpoint at every attempt, and send the undo again each time."""
    return invoke(f"undo of {spec.name}", "undo", spec.compensate_fn, ctx, retry=spec.retry)


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    return f"{'.'.join(map(str, err['loc'])) or 'output'}: {err['msg']}"


def ask_remote(spec: definition.StepDef, ctx: StepContext):
    """Look a step's effect up by its key with the step's reconcile function.

    Returns (verdict, error): Found, NotFound or Undetermined, or None when the step has no
    reconcile function. A lookup that raises is LookupFailed (an Undetermined: only evidence
    settles an unknown outcome), which the runtime asks again within the lookup budget.
    """
    if spec.reconcile_fn is None:
        return None, ""
    # A found result is sealed and kept as call_step keeps the step's own result.
    return lookups.ask(ctx, kind=spec.kind, what="lookup",
                       reconcile=lambda: spec.reconcile_fn(ctx), stem=ctx.step,
                       sealed=lambda value: sensitive.seal_fields(value, spec.sensitive))
