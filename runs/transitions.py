"""Every change of a run's or a step's state, and nothing else.

Each public function here is one transition: in one durable transaction it locks the run
row, checks the move against RUN_TRANSITIONS, writes the change and its audit records, and
commits. Broker messages are sent after commit and are only wake-up hints. The executor (for
automation) and the console (for operators) call these same functions.
"""

import copy
import hashlib
import json
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from pydantic import ValidationError

from audit.chain import Actor, build_record
from audit.models import AuditRecord

from . import checkpoint_sql
from . import definition as d
from .errors import (
    BusinessKeyConflict,
    Classified,
    InvalidInput,
    ReasonRequired,
    SecondPersonRequired,
    TransitionNotAllowed,
    UnknownWorkflow,
)
from .keys import compensation_key, step_key
from .models import (
    AttentionReason,
    ErrorClass,
    Run,
    RunEvent,
    RunStatus,
    Step,
    StepStatus,
    Workflow,
)
from .redaction import redact
from .wakeup import send_wakeup, wake_after_commit

NEW = "new"  # the pseudo-state of a run that does not exist yet
Q, R, W, A = RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.WAITING, RunStatus.ATTENTION
DONE, TERM = RunStatus.COMPLETED, RunStatus.TERMINATED
COMP, COMPED, CFAIL = (RunStatus.COMPENSATING, RunStatus.COMPENSATED,
                       RunStatus.COMPENSATION_FAILED)
# States in which a worker may hold the run's lease.
HELD = frozenset({R, COMP})


@dataclass(frozen=True)
class Move:
    sources: frozenset
    targets: frozenset


def _move(sources, targets) -> Move:
    return Move(frozenset(sources), frozenset(targets))


# The one table of allowed run transitions: action -> (states it may start from, states it
# may lead to). Every status change below goes through _Change.move, which checks it here.
RUN_TRANSITIONS: dict[str, Move] = {
    "start": _move({NEW}, {Q}),
    # A worker takes a queued run, or a waiting or compensating run whose time has come.
    "claim": _move({Q, W, COMP}, {R, W, A, DONE, TERM, COMP, COMPED, CFAIL}),
    # The lease holder records a step's (or a compensation's) outcome and the next intent.
    "record_outcome": _move({R, COMP}, {R, W, A, DONE, TERM, COMP, COMPED, CFAIL}),
    # The lease holder settles an unknown step after asking the remote system.
    "settle_unknown": _move({R}, {R, W, A, DONE, TERM}),
    # The sweeper takes a run back from a worker whose lease ran out.
    "expire_lease": _move({R, COMP}, {Q, COMP}),
    "resume": _move({A, W}, {Q}),
    # A person decided an approval step the run is waiting on, or nobody did in time.
    "decide_approval": _move({W}, {Q, A}),
    "approval_timed_out": _move({W}, {A}),
    "reconcile": _move({A}, {Q, A}),
    "retry_step": _move({A, W}, {Q}),
    # Ask the model again for a stored decision: explicit, with a reason, before anything
    # acted on the old one.
    "ask_again": _move({A, W}, {Q}),
    # Undo completed steps, newest first: by policy for low-impact steps, or by a person.
    "compensate": _move({A, W, CFAIL}, {COMP}),
    # Cancel stops at the next step boundary: at once when no step is in flight.
    "cancel": _move({Q, R, W, A}, {R, TERM}),
    "terminate": _move({Q, R, W, A, COMP, CFAIL}, {TERM}),
    # A terminated run never resumes by accident: reopening is its own, explicit transition.
    "reopen": _move({TERM}, {A}),
    # A person confirms the undo of a high-impact step a compensation paused at.
    "confirm_compensation": _move({A}, {COMP}),
}

DONE_STEP_STATUSES = frozenset({StepStatus.SUCCEEDED, StepStatus.SKIPPED})


def allowed(action: str, status: str) -> bool:
    """Whether `action` may start from run status `status`."""
    return status in RUN_TRANSITIONS[action].sources


def _now(now: datetime | None) -> datetime:
    return now or timezone.now()


def input_hash(data) -> str:
    """The hash that tells a redelivered start event from a different one."""
    return hashlib.sha256(
        json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()


class _Change:
    """The writes of one transition to one locked run: status moves checked against the
    table, audit records chained from the run's head, everything saved together."""

    def __init__(self, run: Run, action: str | None, actor: Actor, now: datetime, *,
                 status: str | None = None):
        """`action` None records evidence only and may not move the run."""
        self.run, self.action, self.actor, self.now = run, action, actor, now
        self.records: list[AuditRecord] = []
        self.events: list[RunEvent] = []
        self.steps: dict[int, Step] = {}
        self.wake_countdown: float | None = None
        self.wake = False
        status = run.status if status is None else status
        self.status_seen = status
        if action is not None and not allowed(action, status):
            raise TransitionNotAllowed(
                f"{action} is not allowed for run {run.pk} ({run.workflow_name} "
                f"{run.business_key}) in state {status}"
            )

    def move(self, to: str, *, reason: str = "", message: str = "") -> None:
        if self.action is None or to not in RUN_TRANSITIONS[self.action].targets:
            raise TransitionNotAllowed(f"{self.action} cannot lead run {self.run.pk} to {to}")
        if to != self.run.status:
            # Run.updated_at is when the status last changed: step progress within a status
            # leaves it (and so every index on it) alone, which keeps that update cheap.
            self.run.updated_at = self.now
            # The progress event, in this same transaction (the outbox of api.webhooks).
            self.events.append(RunEvent(run_id=self.run.pk, status_from=self.status_seen,
                                        status_to=to, created_at=self.now))
            self.status_seen = to
        self.run.status = to
        self.run.attention_reason = reason if to in (A, CFAIL) else ""
        self.run.status_message = message
        if to not in HELD:
            self.run.lease_owner, self.run.lease_expires_at = "", None
        if to in (DONE, TERM, COMPED):
            self.run.finished_at = self.now
        if to == Q:
            self.wake = True

    def audit(self, action: str, *, step: Step | None = None, reason: str = "",
              before=None, after=None, data=None) -> None:
        record = build_record(
            run_id=self.run.pk, head_seq=self.run.audit_seq, head_hash=self.run.audit_head,
            action=action, actor=self.actor, reason=reason,
            step_name=step.name if step is not None else "",
            before=before, after=after, data=redact(data) if data else None, created_at=self.now,
        )
        self.run.audit_seq, self.run.audit_head = record.seq, record.hash
        self.records.append(record)

    def step_changed(self, step: Step) -> None:
        step.updated_at = self.now
        self.steps[step.pk] = step

    def save(self) -> None:
        for step in self.steps.values():
            step.save(update_fields=_STEP_FIELDS)
        AuditRecord.objects.bulk_create(self.records)
        if self.events:
            RunEvent.objects.bulk_create(self.events)
        self.run.save(update_fields=_RUN_FIELDS)
        if self.wake:
            wake_after_commit(self.run.pk)
        elif self.wake_countdown is not None:
            wake_after_commit(self.run.pk, countdown=self.wake_countdown)


_RUN_FIELDS = [
    "status", "attention_reason", "status_message", "current_step", "steps_done",
    "cancel_requested", "fencing_token", "lease_owner", "lease_expires_at", "heartbeat_at",
    "next_wake_at", "audit_seq", "audit_head", "updated_at", "finished_at",
]
_STEP_FIELDS = [
    "status", "attempt", "budget_attempt_base", "budget_started_at", "format_failures",
    "lookup_failures",
    "compensation_attempt", "compensation_ref",
    "remote_ref", "result", "error_class", "error_message", "next_attempt_at", "lease_owner",
    "lease_expires_at", "started_at", "finished_at", "updated_at",
]

# Short retries also get a delayed wake-up hint so they need not wait for the sweeper; the
# database row (next_wake_at) stays the source of truth, so a lost hint loses nothing.
_MAX_HINT_COUNTDOWN = 30.0


def _lock(run_id: int) -> Run:
    try:
        return Run.objects.select_for_update().get(pk=run_id)
    except Run.DoesNotExist:
        raise TransitionNotAllowed(f"run {run_id} does not exist") from None


def _steps(run: Run) -> list[Step]:
    return list(Step.objects.filter(run=run).order_by("position"))


def _step(run: Run, name: str) -> Step:
    try:
        return Step.objects.get(run=run, name=name)
    except Step.DoesNotExist:
        raise TransitionNotAllowed(f"run {run.pk} has no step {name!r}") from None


def _steps_done_with(run: Run, step: Step) -> int:
    """How many steps are done once `step` (being settled now) counts as done."""
    return sum(1 for s in _steps(run) if s.pk == step.pk or s.status in DONE_STEP_STATUSES)


def _require_reason(reason: str, what: str) -> None:
    # Every operator transition calls this first, before any lock is taken: a refusal
    # writes nothing, whichever caller (console, API, CLI, a second person's approval) it is.
    if not isinstance(reason, str) or not reason.strip():
        raise ReasonRequired(f"{what} needs a reason")


def _reset_budget(step: Step) -> None:
    step.budget_attempt_base = step.attempt
    step.budget_started_at = None
    step.format_failures = 0
    step.lookup_failures = 0
    step.next_attempt_at = None


def _snapshot(run: Run, step: Step | None = None) -> dict:
    snap = {"status": run.status}
    if run.attention_reason:
        snap["attention_reason"] = run.attention_reason
    if step is not None:
        snap["step_status"] = step.status
    return snap


# --- starting a run ------------------------------------------------------------------------

BUSINESS_KEY_MAX = Run._meta.get_field("business_key").max_length


def _control_characters(text: str) -> bool:
    # A business key ends up in mail subjects, log lines and file names: no line breaks,
    # no other control characters.
    return any(ord(c) < 32 or 127 <= ord(c) < 160 for c in text)


def _storable(text: str) -> bool:
    # PostgreSQL text and jsonb refuse NUL and lone surrogates; refuse them up front.
    if "\x00" in text or "\\u0000" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def start_run(*, workflow: str, business_key: str, input: dict, actor: Actor,
              now: datetime | None = None, wake: bool = True) -> tuple[Run, bool]:
    """Start a run of the latest version of `workflow`, or find the one already started.

    Returns (run, created). The same (workflow, business key, input) delivered twice, or by
    two processes at once, gives one run. The same business key with a different input, an
    unknown workflow and input that fails the workflow's schema are refused with an error
    naming the problem, and nothing is written. With wake=False no worker is told about the
    new run (the caller advances it itself, as the drill kit does); the sweeper still finds
    it if nobody does.
    """
    definition = d.registry.latest(workflow)
    if definition is None:
        raise UnknownWorkflow(f"unknown workflow {workflow!r}; registered: "
                              f"{', '.join(d.registry.names()) or 'none'}")
    if not business_key or not isinstance(business_key, str):
        raise InvalidInput("business key must be a non-empty string",
                           errors=[{"loc": ["business_key"], "msg": "required"}])
    if len(business_key) > BUSINESS_KEY_MAX or not _storable(business_key):
        raise InvalidInput(
            f"business key must be at most {BUSINESS_KEY_MAX} characters of text without NUL "
            "or unpaired surrogates",
            errors=[{"loc": ["business_key"], "msg": "too long or not storable"}])
    if _control_characters(business_key):
        raise InvalidInput(
            "business key must not contain control characters (line breaks, tabs, ...)",
            errors=[{"loc": ["business_key"], "msg": "contains control characters"}])
    try:
        validated = definition.input_schema.model_validate(input)
    except ValidationError as exc:
        errors = [{"loc": list(e["loc"]), "msg": e["msg"]} for e in exc.errors()]
        fields = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'input'}: {e['msg']}" for e in errors)
        raise InvalidInput(f"input for {workflow} does not match its schema: {fields}",
                           errors=errors) from None
    data = validated.model_dump(mode="json")
    if not _storable(json.dumps(data, ensure_ascii=False)):
        raise InvalidInput(f"input for {workflow} holds NUL characters or unpaired surrogates, "
                           "which cannot be stored", errors=[{"loc": ["input"],
                                                              "msg": "not storable"}])
    digest = input_hash(data)
    now = _now(now)

    with transaction.atomic(durable=True):
        row, _ = Workflow.objects.get_or_create(name=workflow)
        try:
            with transaction.atomic():
                run = Run.objects.create(
                    workflow=row, workflow_name=workflow, workflow_version=definition.version,
                    business_key=business_key, input=data, input_hash=digest,
                    status=Q, step_count=len(definition.steps),
                    current_step=definition.steps[0].name if definition.steps else "",
                    created_at=now, updated_at=now,
                )
        except IntegrityError:
            # Another delivery of this event got there first (or committed while we waited
            # on the unique index): same input means the same run.
            existing = Run.objects.get(workflow_name=workflow, business_key=business_key)
            if existing.input_hash != digest:
                raise BusinessKeyConflict(
                    f"business key {business_key!r} of {workflow} is already used by run "
                    f"{existing.pk} with a different input", run_id=existing.pk,
                ) from None
            return existing, False
        Step.objects.bulk_create([
            Step(run=run, name=s.name, position=i, kind=s.kind, impact=s.impact,
                 version=s.version,
                 idempotency_key=step_key(workflow, business_key, s.name, s.version),
                 compensation_key=(compensation_key(workflow, business_key, s.name, s.version)
                                   if s.compensate_fn else ""),
                 updated_at=now)
            for i, s in enumerate(definition.steps)
        ])
        change = _Change(run, "start", actor, now, status=NEW)
        change.audit("started", before={"status": NEW}, after={"status": Q},
                     data={"version": definition.version, "input_hash": digest})
        change.events.append(RunEvent(run_id=run.pk, status_from=NEW, status_to=Q,
                                      created_at=now))
        change.wake = wake
        change.save()
    return run, True


# --- the executor's transitions ------------------------------------------------------------

@dataclass
class Lease:
    """A worker's hold on a run: the token it claimed with and the rows as it left them."""

    run: Run
    steps: list[Step]
    token: int
    worker: str
    definition: d.Workflow | None
    work: Step | None = None
    # True when `work` is a step whose outcome is unknown: reconcile it before anything else.
    settle_first: bool = False
    # True when `work` is a compensation to call rather than the step's action.
    compensating: bool = False
    finished: bool = False

    def by_name(self, name: str) -> Step:
        return next(s for s in self.steps if s.name == name)


def _lease_until(now: datetime) -> datetime:
    return now + timedelta(seconds=settings.RUNS_LEASE_SECONDS)


def _extend_lease(run: Run, now: datetime) -> None:
    # Renewed once half of it is used up rather than at every step: lease_expires_at is
    # indexed, and leaving it alone lets PostgreSQL update the run row in place.
    run.heartbeat_at = now
    remaining = settings.RUNS_LEASE_SECONDS / 2
    if run.lease_expires_at is None or (run.lease_expires_at - now).total_seconds() < remaining:
        run.lease_expires_at = _lease_until(now)


def claim_run(run_id: int, *, worker: str, now: datetime | None = None) -> Lease | None:
    """Take a queued run, or a waiting run that is due, for `worker`.

    Returns None when the run is not claimable (another worker has it, it is not due, it is
    final): the caller backs off. The claim is a conditional update on the expected status
    and fencing token, so two workers racing for one run get one claim; the first step's
    intent is recorded in the same commit.
    """
    now = _now(now)
    if checkpoint_sql.supported():
        return _claim_in_one_statement(run_id, worker, now)
    with transaction.atomic(durable=True):
        run = Run.objects.select_for_update().filter(pk=run_id).first()
        if run is None or not _due(run, now):
            return None
        claimed = Run.objects.filter(
            pk=run.pk, status=run.status, fencing_token=run.fencing_token
        ).update(fencing_token=run.fencing_token + 1)
        if claimed != 1:
            return None
        lease, change = _apply_claim(run, _steps(run), worker, now)
        change.save()
    return lease


def _claim_in_one_statement(run_id: int, worker: str, now: datetime) -> Lease | None:
    # Read without a lock, decide, then write claim and first intent in one statement that
    # matches only if the run is still as read: of two racing workers, one matches.
    # One read for the run and its steps: every read here is a transaction of its own.
    steps = list(Step.objects.filter(run_id=run_id).select_related("run").order_by("position"))
    run = steps[0].run if steps else Run.objects.filter(pk=run_id).first()
    if run is None or not _due(run, now):
        return None
    for step in steps:
        step.run = run
    expect_status, expect_token, expect_seq = run.status, run.fencing_token, run.audit_seq
    lease, change = _apply_claim(run, steps, worker, now)
    written = checkpoint_sql.write_if_unchanged(
        run=run, steps=list(change.steps.values()), records=change.records,
        events=change.events,
        run_fields=_RUN_FIELDS, step_fields=_STEP_FIELDS, expect_token=expect_token,
        expect_status=expect_status, expect_seq=expect_seq,
    )
    if not written:
        return None
    if change.wake:
        send_wakeup(run.pk)
    return lease


def _due(run: Run, now: datetime) -> bool:
    return run.status == Q or (run.status in (W, COMP) and run.next_wake_at is not None
                               and run.next_wake_at <= now)


def _apply_claim(run: Run, steps: list[Step], worker: str,
                 now: datetime) -> tuple[Lease, "_Change"]:
    """The claim itself, on rows read by the caller: new fencing token, lease, audit record,
    and the first piece of work (or attention when the definition is missing)."""
    before = _snapshot(run)
    run.fencing_token += 1
    change = _Change(run, "claim", Actor.system(worker), now)
    definition = d.registry.get(run.workflow_name, run.workflow_version)
    lease = Lease(run=run, steps=steps, token=run.fencing_token, worker=worker,
                  definition=definition)
    if definition is None:
        change.move(A, reason=AttentionReason.DEFINITION_MISSING,
                    message=f"{run.workflow_name} v{run.workflow_version} is not registered "
                            "in this worker")
        change.audit("definition_missing", before=before, after=_snapshot(run))
        lease.finished = True
        return lease, change
    change.move(COMP if run.status == COMP else R)
    run.lease_owner, run.lease_expires_at, run.heartbeat_at = worker, _lease_until(now), now
    run.next_wake_at = None
    change.audit("claimed", before=before, after=_snapshot(run), data={"worker": worker})
    _next(change, lease)
    return lease, change


def _next(change: _Change, lease: Lease) -> None:
    if change.run.status == COMP:
        _advance_compensation(change, lease)
    else:
        _advance(change, lease)


def _definition_step(lease: Lease, step: Step) -> d.StepDef:
    return lease.definition.step(step.name)


def _advance(change: _Change, lease: Lease) -> None:
    """Move the run to its next piece of work, within the current transaction.

    Records the intent of the next runnable step, or leaves an unknown step for the executor
    to reconcile, or completes the run. A cancel request takes effect here: at a boundary.
    """
    run, now = change.run, change.now
    lease.work, lease.settle_first, lease.compensating = None, False, False
    if run.cancel_requested:
        _terminate_in(change, lease.steps, reason="cancelled at a step boundary")
        lease.finished = True
        return
    step = next((s for s in lease.steps if s.status not in DONE_STEP_STATUSES), None)
    if step is None:
        before = _snapshot(run)
        change.move(DONE)
        run.current_step = ""
        change.audit("completed", before=before, after=_snapshot(run))
        lease.finished = True
        return
    run.current_step = step.name
    if step.status in (StepStatus.UNKNOWN, StepStatus.RUNNING):
        lease.work, lease.settle_first = step, True
        return
    if step.kind == d.APPROVAL:
        # A durable wait: no worker is held; decide_approval moves the run on.
        before = _snapshot(run, step)
        step.status = StepStatus.WAITING
        step.started_at = step.started_at or now
        change.step_changed(step)
        change.move(W, message=f"{step.name} waits for a person's approval")
        run.next_wake_at = None
        change.audit("approval_requested", step=step, before=before, after=_snapshot(run, step))
        lease.finished = True
        return
    before = step.status
    step.status = StepStatus.RUNNING
    step.attempt += 1
    step.budget_started_at = step.budget_started_at or now
    step.started_at = step.started_at or now
    step.next_attempt_at = None
    step.lease_owner, step.lease_expires_at = lease.worker, run.lease_expires_at
    change.step_changed(step)
    change.audit("intent", step=step, before={"step_status": before},
                 after={"step_status": StepStatus.RUNNING},
                 data={"attempt": step.attempt, "key": step.idempotency_key})
    lease.work = step


def _fenced(run: Run, lease: Lease) -> bool:
    return run.fencing_token != lease.token or run.status not in HELD


@dataclass(frozen=True)
class Outcome:
    """What one call of a step function ended with."""

    succeeded: bool
    value: object = None
    remote_ref: str = ""
    error: Classified | None = None
    invalid_output: object = None


def record_outcome(lease: Lease, step: Step, outcome: Outcome, *,
                   now: datetime | None = None) -> Lease:
    """Record a step's outcome under the lease it was called with, and the next intent.

    If the lease was taken over (the token moved on) the result changes no state: it is kept
    in the run's log as a late result, evidence for the operator. A run terminated while the
    step was in flight gets the result recorded on the step, since nobody else will.
    """
    now = _now(now)
    if outcome.succeeded and not lease.compensating and checkpoint_sql.supported():
        if _record_success_in_one_statement(lease, step, outcome, now):
            return lease
    with transaction.atomic(durable=True):
        run = _lock(lease.run.pk)
        if _fenced(run, lease):
            _record_late_result(run, step, outcome, lease, now)
            lease.finished, lease.work = True, None
            return lease
        change = _Change(run, "record_outcome", Actor.system(lease.worker), now)
        _extend_lease(run, now)
        lease.run = run
        if lease.compensating:
            _compensation_outcome(change, lease, step, outcome)
        elif outcome.succeeded:
            _succeed(change, lease, step, outcome.value, outcome.remote_ref, "succeeded")
            _advance(change, lease)
        else:
            _fail(change, lease, step, outcome)
        change.save()
    return lease


def _record_success_in_one_statement(lease: Lease, step: Step, outcome: Outcome,
                                     now: datetime) -> bool:
    """The hot path: the same transition as the locking path, applied to copies of the
    lease holder's rows and written by one conditional statement (see checkpoint_sql).
    False, with nothing written and the lease untouched, if the run moved on meanwhile."""
    trial = copy.copy(lease)
    trial.run = _shallow_copy(lease.run)
    trial.steps = [_shallow_copy(s) for s in lease.steps]
    expect_status, expect_seq = trial.run.status, trial.run.audit_seq
    change = _Change(trial.run, "record_outcome", Actor.system(lease.worker), now)
    _extend_lease(trial.run, now)
    _succeed(change, trial, trial.by_name(step.name), outcome.value, outcome.remote_ref,
             "succeeded")
    _advance(change, trial)
    written = checkpoint_sql.write_if_unchanged(
        run=trial.run, steps=list(change.steps.values()), records=change.records,
        events=change.events,
        run_fields=_RUN_FIELDS, step_fields=_STEP_FIELDS, expect_token=lease.token,
        expect_status=expect_status, expect_seq=expect_seq,
    )
    if not written:
        return False
    lease.run, lease.steps, lease.work = trial.run, trial.steps, trial.work
    lease.finished, lease.settle_first = trial.finished, trial.settle_first
    if change.wake:  # the statement has committed: the hint can go now
        send_wakeup(trial.run.pk)
    return True


def _shallow_copy(instance):
    # copy.copy of a model instance goes through __reduce__ and costs ten times more.
    clone = instance.__class__.__new__(instance.__class__)
    clone.__dict__ = instance.__dict__.copy()
    return clone


def _succeed(change: _Change, lease: Lease, step: Step, value, remote_ref: str,
             action: str, data: dict | None = None) -> None:
    before = step.status
    step.status = StepStatus.SUCCEEDED
    step.result = redact(value)
    step.remote_ref = remote_ref or ""
    step.error_class, step.error_message = "", ""
    step.finished_at = change.now
    step.lease_owner, step.lease_expires_at = "", None
    change.step_changed(step)
    change.run.steps_done = sum(1 for s in lease.steps if s.status in DONE_STEP_STATUSES)
    change.audit(action, step=step, before={"step_status": before},
                 after={"step_status": step.status, "remote_ref": step.remote_ref},
                 data=data)


def _fail(change: _Change, lease: Lease, step: Step, outcome: Outcome) -> None:
    """Apply a classified error to the step and decide what the run does next."""
    error, run = outcome.error, change.run
    spec = _definition_step(lease, step)
    before = _snapshot(run, step)
    step.error_class, step.error_message = error.error_class, error.message
    step.lease_owner, step.lease_expires_at = "", None
    cls = error.error_class
    if cls == ErrorClass.UNKNOWN and not spec.has_side_effect:
        cls = ErrorClass.TRANSIENT  # nothing to duplicate: a read is simply tried again

    if cls == ErrorClass.MODEL_FORMAT:
        step.format_failures += 1
        step.result = {"invalid_output": redact(outcome.invalid_output)}
        if step.format_failures <= spec.format_failure_budget:
            step.status = StepStatus.PENDING
            change.step_changed(step)
            change.audit("model_output_rejected", step=step, before=before,
                         after=_snapshot(run, step), data={"error": error.message,
                         "failures": step.format_failures})
            _advance(change, lease)
            return
        step.status = StepStatus.FAILED
        change.step_changed(step)
        _halt(change, lease, step, before, A, AttentionReason.MODEL_OUTPUT_PAUSED,
              f"{step.name}: model output failed its schema {step.format_failures} times",
              error.message)
        return

    if cls == ErrorClass.TRANSIENT:
        _send_again(change, lease, step, before=before, why="transient error",
                    error=error.message, retry_after=error.retry_after)
        return

    if cls == ErrorClass.PERMANENT:
        step.status = StepStatus.FAILED
        change.step_changed(step)
        _stop(change, lease, step, before, AttentionReason.PERMANENT_ERROR,
              f"{step.name}: {error.message}", error.message)
        return

    if cls == ErrorClass.UNKNOWN:
        # It may have happened. Never relabel it failed: the executor reconciles by key
        # before anything else is written.
        step.status = StepStatus.UNKNOWN
        change.step_changed(step)
        change.audit("outcome_unknown", step=step, before=before, after=_snapshot(run, step),
                     data={"error": error.message})
        lease.work, lease.settle_first = step, True
        return

    # Unclassified: for a side-effecting step we cannot know whether it acted.
    step.status = StepStatus.UNKNOWN if spec.has_side_effect else StepStatus.FAILED
    step.error_class = ErrorClass.UNCLASSIFIED
    change.step_changed(step)
    _halt(change, lease, step, before, A, AttentionReason.UNCLASSIFIED_ERROR,
          f"{step.name}: {error.message}", error.message)


def _send_again(change: _Change, lease: Lease, step: Step, *, before: dict, why: str,
                error: str, retry_after: float | None = None, compensation: bool = False,
                action: str = "", data: dict | None = None) -> None:
    """Schedule one more sending of `step` (or of its compensation), or stop.

    Every path that sends a step again comes through here: a retry after a transient error,
    a resend after a lookup by key found nothing, a resend to a receiver that honours keys
    without a lookup, and a compensation tried again. The attempt counts against the step's
    budget (attempts and elapsed time) and the next one waits out the step's backoff; once
    the budget is spent the run stops for a person with a reason that says so.
    """
    run, now = change.run, change.now
    policy = _definition_step(lease, step).retry
    attempts = (step.compensation_attempt if compensation
                else step.attempt - step.budget_attempt_base)
    elapsed = (now - step.budget_started_at).total_seconds() if step.budget_started_at else 0
    delay = policy.delay(attempts, retry_after=retry_after)
    step.lease_owner, step.lease_expires_at = "", None
    if policy.allows_another(attempts_made=attempts, elapsed=elapsed, next_delay=delay):
        step.next_attempt_at = now + timedelta(seconds=delay)
        if compensation:
            # The run stays compensating, released until the retry is due.
            run.lease_owner, run.lease_expires_at = "", None
        else:
            step.status = StepStatus.SCHEDULED
            change.move(W)
        change.step_changed(step)
        run.next_wake_at = step.next_attempt_at
        change.audit(action or ("compensation_retry_scheduled" if compensation
                                 else "retry_scheduled"),
                     step=step, before=before, after=_snapshot(run, step),
                     data={**(data or {}), "why": why, "error": error, "attempt": attempts,
                           "delay_seconds": round(delay, 3)})
        if delay <= _MAX_HINT_COUNTDOWN:
            change.wake_countdown = delay
        lease.finished, lease.work = True, None
        return
    spent = (f"retry budget spent after {attempts} attempt{'s' if attempts != 1 else ''} "
             f"({why}); last error: {error}")
    if compensation:
        step.status = StepStatus.COMPENSATION_FAILED
        change.step_changed(step)
        _halt(change, lease, step, before, CFAIL, AttentionReason.COMPENSATION_FAILED,
              f"compensation of {step.name} failed: {spent}", error,
              action="compensation_failed")
        return
    step.status = StepStatus.FAILED
    step.error_class = ErrorClass.EXHAUSTED
    change.step_changed(step)
    _stop(change, lease, step, before, AttentionReason.BUDGET_EXHAUSTED,
          f"{step.name}: {spent}", error)


def _halt(change: _Change, lease: Lease, step: Step, before: dict, to: str, reason: str,
          message: str, error: str, action: str = "attention") -> None:
    """Stop the lease holder's work and leave the run for a person, saying why."""
    change.move(to, reason=reason, message=message)
    change.audit(action, step=step, before=before, after=_snapshot(change.run, step),
                 data={"error": error})
    lease.finished, lease.work = True, None


def _stop(change: _Change, lease: Lease, step: Step, before: dict, reason: str,
          message: str, error: str) -> None:
    """A step failed with evidence that nothing changed: undo the completed steps where the
    workflow's policy allows it, otherwise stop for a person. An automatic compensation
    undoes only low-impact steps by itself: it pauses for a person at any high-impact undo
    (see _advance_compensation)."""
    plan = compensation_plan(lease.steps, lease.definition)
    automatic = (lease.definition.auto_compensate and plan
                 and not any(s.status == StepStatus.UNKNOWN for s in lease.steps))
    if automatic:
        change.audit("failed", step=step, before=before, after=_snapshot(change.run, step),
                     data={"error": error})
        _begin_compensation(change, plan, reason=f"automatic, by policy: {message}")
        _advance_compensation(change, lease)
        return
    _halt(change, lease, step, before, A, reason, message, error)


def compensation_plan(steps: list[Step], definition: d.Workflow | None) -> list[Step]:
    """The steps a compensation would undo, in the order it would undo them: completed steps
    that declare a compensation (and failed compensations, tried again), newest first."""
    if definition is None:
        return []
    known = {s.name for s in definition.steps if s.compensate_fn is not None}
    plan = [s for s in steps if s.name in known and s.status in (
        StepStatus.SUCCEEDED, StepStatus.COMPENSATING, StepStatus.COMPENSATION_FAILED)]
    return sorted(plan, key=lambda s: (s.finished_at or s.updated_at, s.position), reverse=True)


def _begin_compensation(change: _Change, plan: list[Step], *, reason: str,
                        data: dict | None = None) -> None:
    before = _snapshot(change.run)
    for step in plan:
        if step.status == StepStatus.COMPENSATION_FAILED:
            step.status = StepStatus.COMPENSATING  # tried again with the same key
            step.next_attempt_at = None
            step.budget_started_at = None
            change.step_changed(step)
    change.move(COMP)
    change.audit("compensation_started", reason=reason, before=before,
                 after=_snapshot(change.run),
                 data={**(data or {}), "order": [s.name for s in plan]})


def _advance_compensation(change: _Change, lease: Lease) -> None:
    """Record the intent of the next compensation (newest completed step first), or finish."""
    run, now = change.run, change.now
    lease.work, lease.settle_first, lease.compensating = None, False, False
    plan = [s for s in compensation_plan(lease.steps, lease.definition)
            if s.status != StepStatus.COMPENSATION_FAILED]
    if not plan:
        before = _snapshot(run)
        for step in lease.steps:
            if step.status in (StepStatus.PENDING, StepStatus.SCHEDULED):
                step.status = StepStatus.SKIPPED
                change.step_changed(step)
        change.move(COMPED)
        run.current_step = ""
        change.audit("compensated", before=before, after=_snapshot(run))
        lease.finished = True
        return
    step = plan[0]
    if step.impact == d.HIGH and step.status == StepStatus.SUCCEEDED:
        # Undoing a high-impact effect sends something that cannot be taken back (a
        # correction to a person, a reversing entry): prepared and shown, sent only once a
        # person confirms (confirm_compensation); older undos wait behind it.
        before = _snapshot(run, step)
        run.current_step = step.name
        change.move(A, reason=AttentionReason.COMPENSATION_PAUSED,
                    message=f"compensation paused before undoing {step.name} (high impact): "
                            "confirm what it will send to carry on")
        change.audit("compensation_paused", step=step, before=before,
                     after=_snapshot(run, step),
                     data={"waiting": [s.name for s in plan]})
        lease.finished = True
        return
    before = step.status
    if before == StepStatus.SUCCEEDED:
        step.budget_started_at = now  # the compensation's own retry budget starts now
    step.status = StepStatus.COMPENSATING
    step.compensation_attempt += 1
    step.budget_started_at = step.budget_started_at or now
    step.next_attempt_at = None
    step.lease_owner, step.lease_expires_at = lease.worker, run.lease_expires_at
    run.current_step = step.name
    change.step_changed(step)
    change.audit("compensation_intent", step=step, before={"step_status": before},
                 after={"step_status": step.status},
                 data={"attempt": step.compensation_attempt, "key": step.compensation_key})
    lease.work, lease.compensating = step, True


def _compensation_outcome(change: _Change, lease: Lease, step: Step, outcome: Outcome) -> None:
    run = change.run
    before = _snapshot(run, step)
    step.lease_owner, step.lease_expires_at = "", None
    if outcome.succeeded:
        step.status = StepStatus.COMPENSATED
        step.compensation_ref = outcome.remote_ref or ""
        step.error_class, step.error_message = "", ""
        change.step_changed(step)
        change.audit("compensation_succeeded", step=step, before=before,
                     after={**_snapshot(run, step), "compensation_ref": step.compensation_ref})
        _advance_compensation(change, lease)
        return
    error = outcome.error
    step.error_class, step.error_message = error.error_class, error.message
    # A compensation carries its own key and must be idempotent, so an unknown outcome is
    # settled by sending it again, within its step's retry budget.
    if error.error_class in (ErrorClass.TRANSIENT, ErrorClass.UNKNOWN):
        _send_again(change, lease, step, before=before, why=f"{error.error_class} error",
                    error=error.message, retry_after=error.retry_after, compensation=True)
        return
    step.status = StepStatus.COMPENSATION_FAILED
    change.step_changed(step)
    _halt(change, lease, step, before, CFAIL, AttentionReason.COMPENSATION_FAILED,
          f"compensation of {step.name} failed: {error.message}", error.message,
          action="compensation_failed")


def _record_late_result(run: Run, step: Step, outcome: Outcome, lease: Lease,
                        now: datetime) -> None:
    change = _Change(run, None, Actor.system(lease.worker), now)
    data = {
        # "claim", not "token": the redaction filter rightly masks anything named token.
        "worker": lease.worker, "claim": lease.token, "current_claim": run.fencing_token,
        "succeeded": outcome.succeeded, "remote_ref": outcome.remote_ref,
        "value": outcome.value,
        "error": outcome.error.message if outcome.error else "",
    }
    current = Step.objects.get(pk=step.pk)
    if run.status == TERM and current.status == StepStatus.UNKNOWN and outcome.succeeded:
        before = current.status
        current.status = StepStatus.SUCCEEDED
        current.result = redact(outcome.value)
        current.remote_ref = outcome.remote_ref or ""
        current.finished_at = now
        change.step_changed(current)
        change.audit("late_result_recorded", step=current, before={"step_status": before},
                     after={"step_status": current.status, "remote_ref": current.remote_ref},
                     data=data)
    else:
        change.audit("late_result", step=step, data=data)
    change.save()


def settle_unknown(lease: Lease, step: Step, verdict, *, error: str = "",
                   now: datetime | None = None) -> Lease:
    """Settle the lease holder's unknown step with what reconciliation found.

    Found: the effect happened (the key is the evidence, whatever the impact); the step
    succeeds with its remote reference. LookupFailed: the lookup itself erred; it is a read,
    so it is asked again with backoff until the step's lookup budget is spent. NotFound, or
    no lookup but a receiver that honours keys: a low-impact step is sent again with the
    same key, as a counted, backed-off attempt (see _send_again); a high-impact step waits
    for a person. Undetermined (or no way to ask): a person must settle it.
    """
    now = _now(now)
    spec = _definition_step(lease, step)
    with transaction.atomic(durable=True):
        run = _lock(lease.run.pk)
        if _fenced(run, lease):
            lease.finished, lease.work = True, None
            return lease
        change = _Change(run, "settle_unknown", Actor.system(lease.worker), now)
        lease.run = run
        _extend_lease(run, now)
        before = _snapshot(run, step)
        if isinstance(verdict, d.Found):
            step.lookup_failures = 0
            _succeed(change, lease, step, verdict.result, verdict.ref, "reconciled",
                     data={"verdict": "found"})
            _advance(change, lease)
        elif isinstance(verdict, d.LookupFailed):
            _lookup_failed(change, lease, step, spec, before, verdict)
        elif (spec.impact == d.LOW and isinstance(verdict, d.NotFound)
              and not spec.honours_key and _too_early_to_trust(step, spec, now)):
            # The receiver ignores keys and the request may still be in flight: "not found"
            # now proves nothing. Look again once it has had time to land.
            # Measured from the first "not found": a second lookup before then changes nothing.
            at = step.next_attempt_at or now + timedelta(seconds=spec.lookup_delay)
            _look_again(change, lease, step, before, at=at,
                        message=f"{step.name}: not found yet; looking again before sending "
                                "again", data={"verdict": "not found yet"})
        elif spec.impact == d.LOW and (isinstance(verdict, d.NotFound)
                                       or (verdict is None and spec.honours_key)):
            step.lookup_failures = 0
            why = ("lookup by key found nothing" if verdict is not None else
                   "no lookup; the receiver deduplicates on the key")
            _send_again(change, lease, step, before=before, why=why,
                        error=step.error_message or error, action="reconciled",
                        data={"verdict": "not found" if verdict is not None else "cannot ask",
                              "then": "send again with the same key"})
        else:
            if isinstance(verdict, d.NotFound):
                why = "reconciliation found no effect, but a high-impact step is sent again " \
                      "only after a person confirms"
                label = "not found"
            elif verdict is None:
                why = ("no reconcile function, and a high-impact step is not resent without "
                       "a person" if spec.honours_key else
                       "no reconcile function and the receiver does not honour keys")
                label = "cannot ask"
            else:
                why = f"reconciliation could not tell: {verdict.reason or error}"
                label = "undetermined"
            change.move(A, reason=AttentionReason.UNKNOWN_OUTCOME, message=f"{step.name}: {why}")
            change.audit("attention", step=step, before=before, after=_snapshot(run, step),
                         data={"verdict": label, "error": error})
            lease.finished, lease.work = True, None
        change.save()
    return lease


def _lookup_failed(change: _Change, lease: Lease, step: Step, spec: d.StepDef, before: dict,
                   verdict: d.LookupFailed) -> None:
    """A lookup by key erred: ask again with the step's backoff, or, once its lookup budget
    is spent, stop for a person saying how many lookups failed and how."""
    step.lookup_failures += 1
    failures = step.lookup_failures
    if failures < spec.lookup_attempts:
        _look_again(change, lease, step, before,
                    at=change.now + timedelta(seconds=spec.retry.delay(failures)),
                    message=f"{step.name}: lookup by key failed ({failures} of "
                            f"{spec.lookup_attempts}); asking again",
                    data={"verdict": "lookup failed", "error": verdict.reason,
                          "lookup_failures": failures}, action="lookup_retry_scheduled")
        return
    change.step_changed(step)
    change.move(A, reason=AttentionReason.UNKNOWN_OUTCOME,
                message=f"{step.name}: {failures} lookup{'s' if failures != 1 else ''} by key "
                        f"failed, the last with: {verdict.reason}; the outcome is still "
                        "unknown")
    change.audit("attention", step=step, before=before, after=_snapshot(change.run, step),
                 data={"verdict": "lookup failed", "error": verdict.reason,
                       "lookup_failures": failures})
    lease.finished, lease.work = True, None


def _look_again(change: _Change, lease: Lease, step: Step, before: dict, *, at: datetime,
                message: str, data: dict, action: str = "reconcile_scheduled") -> None:
    """Release the run until the step's effect is looked up again at `at` (the step stays
    unknown: nothing is sent before the lookup)."""
    run, now = change.run, change.now
    step.next_attempt_at = at
    change.step_changed(step)
    change.move(W, message=message)
    run.next_wake_at = step.next_attempt_at
    change.audit(action, step=step, before=before, after=_snapshot(run, step),
                 data={**data, "recheck_at": step.next_attempt_at.isoformat()})
    wait = (step.next_attempt_at - now).total_seconds()
    if wait <= _MAX_HINT_COUNTDOWN:
        change.wake_countdown = max(wait, 0.0)
    lease.finished, lease.work = True, None


def _too_early_to_trust(step: Step, spec: d.StepDef, now: datetime) -> bool:
    return spec.lookup_delay > 0 and (step.next_attempt_at is None
                                      or step.next_attempt_at > now)


def heartbeat(lease: Lease, *, now: datetime | None = None) -> bool:
    """Extend the lease of a long step. False if the lease was lost to another worker."""
    now = _now(now)
    with transaction.atomic(durable=True):
        extended = Run.objects.filter(
            pk=lease.run.pk, status=R, fencing_token=lease.token
        ).update(lease_expires_at=_lease_until(now), heartbeat_at=now)
    return extended == 1


def expire_lease(run_id: int, *, now: datetime | None = None, actor: Actor | None = None) -> bool:
    """Take a run back from a worker whose lease ran out (the sweeper calls this).

    The fencing token moves on, so the old worker can no longer record anything. A
    side-effecting step it was running becomes unknown (it may have acted) and is
    reconciled before anything is sent again; a read or decision step simply runs again.
    """
    now = _now(now)
    with transaction.atomic(durable=True):
        run = _lock(run_id)
        if run.status not in HELD or run.lease_expires_at is None or run.lease_expires_at > now:
            return False
        change = _Change(run, "expire_lease", actor or Actor.system("sweeper"), now)
        before = _snapshot(run)
        previous_owner = run.lease_owner
        run.fencing_token += 1
        for step in Step.objects.filter(run=run, status=StepStatus.RUNNING):
            step_before = step.status
            if step.kind in (d.WRITE, d.NOTIFY):
                step.status = StepStatus.UNKNOWN
                step.error_class = ErrorClass.UNKNOWN
                step.error_message = f"lease of {previous_owner} expired while running"
            else:
                step.status = StepStatus.PENDING
            step.lease_owner, step.lease_expires_at = "", None
            change.step_changed(step)
            change.audit("step_lease_expired", step=step, before={"step_status": step_before},
                         after={"step_status": step.status})
        if run.status == COMP:
            # The compensation in flight is sent again with its own key by the next worker.
            change.move(COMP)
            run.lease_owner, run.lease_expires_at = "", None
            run.next_wake_at = now
            change.wake = True
        else:
            change.move(Q)
        change.audit("lease_expired", before=before, after=_snapshot(run),
                     data={"previous_owner": previous_owner})
        change.save()
    return True


# --- operator actions: when each can succeed ----------------------------------------------
# One answer to "can this action succeed on this run (and step)?": the transitions below
# refuse with it, and every caller (console, bulk actions, API, CLI, through runs.actions)
# offers an action only where it returns None. A rule written here cannot drift from the
# rule a caller shows.

STEP_ACTIONS = frozenset({"reconcile", "retry_step", "ask_again", "confirm_compensation"})
# Actions that end a run, or undo or abandon its effects.
SECOND_PERSON_ACTIONS = frozenset({"cancel", "terminate", "compensate"})
# Actions that move a run forward again, which a compensation under way rules out.
FORWARD_ACTIONS = frozenset({"resume", "reconcile", "retry_step", "ask_again"})
EFFECT_KINDS = (d.WRITE, d.NOTIFY)
# A step in one of these states has an effect in another system (not yet undone).
_EFFECT_STANDS = frozenset({StepStatus.SUCCEEDED, StepStatus.COMPENSATING,
                            StepStatus.COMPENSATION_FAILED})
_UNDO_STARTED = frozenset({StepStatus.COMPENSATING, StepStatus.COMPENSATED,
                           StepStatus.COMPENSATION_FAILED})


def high_impact_effects(steps: list[Step]) -> list[Step]:
    """The high-impact steps whose effect exists in another system (not yet undone)."""
    return [s for s in steps if s.kind in EFFECT_KINDS and s.impact == d.HIGH
            and s.status in _EFFECT_STANDS]


def needs_second_person(action: str, steps: list[Step]) -> bool:
    """Whether `action` needs a second person's approval: it ends the run, or undoes or
    abandons its effects, after a high-impact effect took place. The one rule, for every
    caller and for single and bulk actions alike."""
    return action in SECOND_PERSON_ACTIONS and bool(high_impact_effects(steps))


def paused_undo(run: Run, steps: list[Step], definition: d.Workflow | None) -> Step | None:
    """The high-impact step whose undo a paused compensation waits to have confirmed."""
    if run.status != A or run.attention_reason != AttentionReason.COMPENSATION_PAUSED:
        return None
    plan = compensation_plan(steps, definition)
    return plan[0] if plan and plan[0].status == StepStatus.SUCCEEDED else None


def step_refusal(action: str, run: Run, step: Step, steps: list[Step],
                 definition: d.Workflow | None) -> str | None:
    """Why `action` cannot be aimed at `step`, or None if it can."""
    where = f"step {step.name} of run {run.pk}"
    if action == "reconcile":
        if step.status not in (StepStatus.UNKNOWN, StepStatus.FAILED):
            return f"{where} is {step.status}; only an unknown or failed step can be reconciled"
        if step.kind not in EFFECT_KINDS:
            return f"{where} changes nothing in another system: there is nothing to reconcile"
    elif action == "retry_step":
        if step.status == StepStatus.UNKNOWN:
            return (f"the outcome of {step.name} is unknown: reconcile it first (look it up "
                    "by key, or record what you found); sending it again blindly could do it "
                    "twice")
        if step.status not in (StepStatus.FAILED, StepStatus.SCHEDULED):
            return f"{where} is {step.status}; only a failed or scheduled step can be retried"
    elif action == "ask_again":
        if step.kind != d.DECISION or step.status != StepStatus.SUCCEEDED:
            return f"{where} is not a stored decision"
        acted = [s.name for s in steps if s.position > step.position
                 and s.kind in EFFECT_KINDS and s.status not in
                 (StepStatus.PENDING, StepStatus.SKIPPED, StepStatus.FAILED)]
        if acted:
            return f"{', '.join(acted)} already acted on this decision; compensate first"
    elif action == "confirm_compensation":
        paused = paused_undo(run, steps, definition)
        if paused is None or paused.pk != step.pk:
            return f"no compensation waits for the undo of {step.name} to be confirmed"
    else:
        return f"{action} is not aimed at a step"
    return None


def refusal(action: str, run: Run, steps: list[Step], definition: d.Workflow | None, *,
            step: Step | None = None) -> str | None:
    """Why the operator action `action` cannot succeed on `run` (aimed at `step`, for the
    actions that take one), or None if it can. Without `step`, a step action can succeed if
    any step of the run qualifies."""
    if not allowed(action, run.status):
        return (f"{action} is not allowed for run {run.pk} ({run.workflow_name} "
                f"{run.business_key}) in state {run.status}")
    if action in FORWARD_ACTIONS and (any(s.status in _UNDO_STARTED for s in steps)
                                      or paused_undo(run, steps, definition)):
        return (f"run {run.pk} is being compensated: carry the compensation on (confirm, "
                "compensate) or terminate it; it does not go forward again")
    if action == "compensate":
        if definition is None:
            return (f"{run.workflow_name} v{run.workflow_version} is not registered: its "
                    "compensations are unknown")
        unknown = [s.name for s in steps if s.status == StepStatus.UNKNOWN]
        if unknown:
            return (f"settle {', '.join(unknown)} first: compensation starts only once it is "
                    "known whether the original action happened")
        paused = paused_undo(run, steps, definition)
        if paused is not None:
            return (f"the compensation is under way, paused at the undo of {paused.name}: "
                    "confirm it to carry on")
        if not compensation_plan(steps, definition):
            return f"run {run.pk} has no completed step to compensate"
    if action == "confirm_compensation" and paused_undo(run, steps, definition) is None:
        return f"run {run.pk} is not paused at the undo of a high-impact step"
    if action in STEP_ACTIONS:
        if step is not None:
            return step_refusal(action, run, step, steps, definition)
        if not eligible_steps(action, run, steps, definition):
            return f"no step of run {run.pk} can be the target of {action}"
    return None


def eligible_steps(action: str, run: Run, steps: list[Step],
                   definition: d.Workflow | None) -> list[Step]:
    """The steps `action` can be aimed at (empty for actions on the whole run)."""
    if action not in STEP_ACTIONS:
        return []
    return [s for s in steps if step_refusal(action, run, s, steps, definition) is None]


def _same_person(a: Actor, b: Actor) -> bool:
    if a.user_id is not None or b.user_id is not None:
        return a.user_id == b.user_id
    return a.label == b.label


@dataclass
class _Operation:
    """What an operator transition works on, locked and checked."""

    change: _Change
    run: Run
    steps: list[Step]
    step: Step | None
    definition: d.Workflow | None


@contextmanager
def _operator_transition(run_id: int, action: str, *, actor: Actor, reason: str,
                         now: datetime | None, step_name: str | None = None,
                         approved_by: Actor | None = None):
    """The skeleton of every operator transition: a reason, the run locked, the move checked
    against the table, the action checked against refusal() and the four-eyes rule; then the
    body's changes saved together, or (if the body raises) nothing at all."""
    _require_reason(reason, action.replace("_", " "))
    now = _now(now)
    with transaction.atomic(durable=True):
        run = _lock(run_id)
        change = _Change(run, action, actor, now)
        steps = _steps(run)
        step = None
        if step_name is not None:
            step = next((s for s in steps if s.name == step_name), None)
            if step is None:
                raise TransitionNotAllowed(f"run {run_id} has no step {step_name!r}")
        definition = d.registry.get(run.workflow_name, run.workflow_version)
        refused = refusal(action, run, steps, definition, step=step)
        if refused:
            raise TransitionNotAllowed(refused)
        if needs_second_person(action, steps):
            names = ", ".join(s.name for s in high_impact_effects(steps))
            if approved_by is None:
                raise SecondPersonRequired(
                    f"{action} of run {run_id} needs a second person's approval: high-impact "
                    f"effects took place ({names})")
            if _same_person(actor, approved_by):
                raise SecondPersonRequired(
                    f"{action} of run {run_id} must be approved by someone other than "
                    f"{actor.label}")
        yield _Operation(change, run, steps, step, definition)
        change.save()


def _four_eyes_data(data: dict | None, approved_by: Actor | None) -> dict | None:
    if approved_by is None:
        return data
    return {**(data or {}), "approved_by": approved_by.label}


# --- operator actions (also available to automation) --------------------------------------
# Every one needs a reason and is refused, with nothing written, where refusal() says it
# cannot succeed. runs.actions is the table callers read.

def resume(run_id: int, *, actor: Actor, reason: str, now: datetime | None = None) -> Run:
    """Continue a run from its last checkpoint.

    The current step is tried again with its budget renewed; an unknown step is reconciled
    first, never blindly resent.
    """
    with _operator_transition(run_id, "resume", actor=actor, reason=reason, now=now) as op:
        run, change = op.run, op.change
        before = _snapshot(run)
        for step in op.steps:
            if step.status in (StepStatus.FAILED, StepStatus.SCHEDULED):
                step.status = StepStatus.PENDING
                _reset_budget(step)
                change.step_changed(step)
            elif step.status == StepStatus.UNKNOWN and step.lookup_failures:
                step.lookup_failures = 0  # the person asks for the lookups to be tried again
                change.step_changed(step)
        run.next_wake_at = None
        change.move(Q)
        change.audit("resumed", reason=reason, before=before, after=_snapshot(run))
    return run


def reconcile(run_id: int, *, step_name: str, verdict, actor: Actor, reason: str,
              evidence: str = "", now: datetime | None = None) -> Run:
    """Settle a step whose outcome a person or a lookup has established.

    `verdict` is Found(ref) (the effect happened: the step succeeds and the run continues),
    NotFound() (evidence nothing changed: the step is marked failed and waits for an explicit
    retry) or Undetermined(reason) (still unknown; the run stays in attention).
    """
    with _operator_transition(run_id, "reconcile", actor=actor, reason=reason, now=now,
                              step_name=step_name) as op:
        run, change, step = op.run, op.change, op.step
        before = _snapshot(run, step)
        data = {"evidence": evidence}
        step.lookup_failures = 0
        if isinstance(verdict, d.Found):
            step.status = StepStatus.SUCCEEDED
            step.remote_ref = verdict.ref
            step.result = redact(verdict.result) if verdict.result is not None else step.result
            step.error_class, step.error_message = "", ""
            step.finished_at = change.now
            change.step_changed(step)
            run.steps_done = _steps_done_with(run, step)
            change.move(Q)
            data["verdict"] = "found"
        elif isinstance(verdict, d.NotFound):
            step.status = StepStatus.FAILED
            step.error_message = f"settled as not done: {evidence or reason}"
            change.step_changed(step)
            change.move(A, reason=run.attention_reason or AttentionReason.UNKNOWN_OUTCOME,
                        message=f"{step_name} settled as not done; retry the step to send it "
                                "again with the same key")
            data["verdict"] = "not found"
        else:
            change.step_changed(step)
            change.move(A, reason=run.attention_reason or AttentionReason.UNKNOWN_OUTCOME,
                        message=f"{step_name}: still undetermined: "
                                f"{getattr(verdict, 'reason', '')}")
            data["verdict"] = "undetermined"
        change.audit("reconciled", step=step, reason=reason, before=before,
                     after=_snapshot(run, step), data=data)
    return run


def retry_step(run_id: int, *, step_name: str, actor: Actor, reason: str,
               now: datetime | None = None) -> Run:
    """Send one failed or scheduled step again with the same idempotency key, with a fresh
    retry budget. A step whose outcome is unknown is refused: reconcile it first."""
    with _operator_transition(run_id, "retry_step", actor=actor, reason=reason, now=now,
                              step_name=step_name) as op:
        run, change, step = op.run, op.change, op.step
        before = _snapshot(run, step)
        step.status = StepStatus.PENDING
        _reset_budget(step)
        change.step_changed(step)
        run.next_wake_at = None
        change.move(Q)
        change.audit("step_retried", step=step, reason=reason, before=before,
                     after=_snapshot(run, step), data={"key": step.idempotency_key})
    return run


def compensate(run_id: int, *, actor: Actor, reason: str, data: dict | None = None,
               approved_by: Actor | None = None, now: datetime | None = None) -> Run:
    """Undo the run's completed steps, newest first, each with its own key and audit record.

    Refused while any step's outcome is unknown: whether to undo an action depends on
    whether it happened, so that is settled first. After a high-impact effect it needs a
    second person (`approved_by`). A run whose compensation failed can be compensated
    again: the failed compensation is sent again with the same key.
    """
    with _operator_transition(run_id, "compensate", actor=actor, reason=reason, now=now,
                              approved_by=approved_by) as op:
        run, change = op.run, op.change
        plan = compensation_plan(op.steps, op.definition)
        _begin_compensation(change, plan, reason=reason,
                            data=_four_eyes_data(data, approved_by))
        run.next_wake_at = change.now  # due at once; the sweeper finds it if the hint is lost
        change.wake = True
    return run


def confirm_compensation(run_id: int, *, step_name: str, actor: Actor, reason: str,
                         data: dict | None = None, now: datetime | None = None) -> Run:
    """A person confirms the undo of a high-impact step at which a compensation paused
    (`data` records what they were shown it would send); the compensation carries on with
    it, then with the older undos."""
    with _operator_transition(run_id, "confirm_compensation", actor=actor, reason=reason,
                              now=now, step_name=step_name) as op:
        run, change, step = op.run, op.change, op.step
        before = _snapshot(run, step)
        step.status = StepStatus.COMPENSATING
        step.budget_started_at = change.now  # the compensation's own retry budget starts now
        step.next_attempt_at = None
        change.step_changed(step)
        change.move(COMP)
        run.next_wake_at = change.now
        change.wake = True
        change.audit("compensation_confirmed", step=step, reason=reason, before=before,
                     after=_snapshot(run, step), data=data)
    return run


def decide_approval(run_id: int, *, step_name: str, approved: bool, actor: Actor,
                    comment: str = "", data: dict | None = None,
                    now: datetime | None = None) -> Run:
    """Record a person's decision on the approval step the run waits on.

    Approved: the step succeeds and the run continues. Rejected: the step fails and the run
    waits for an operator in attention (rejection is a business outcome, not an error to
    retry).
    """
    now = _now(now)
    with transaction.atomic(durable=True):
        run = _lock(run_id)
        change = _Change(run, "decide_approval", actor, now)
        step = _waiting_approval(run, step_name)
        before = _snapshot(run, step)
        step.finished_at = now
        step.result = {"approved": approved, "by": actor.label, "comment": comment}
        if approved:
            step.status = StepStatus.SUCCEEDED
            step.remote_ref = f"approved by {actor.label}"
            change.step_changed(step)
            run.steps_done = _steps_done_with(run, step)
            change.move(Q)
        else:
            step.status = StepStatus.FAILED
            step.error_message = f"rejected by {actor.label}: {comment}"
            change.step_changed(step)
            change.move(A, reason=AttentionReason.APPROVAL_REJECTED,
                        message=f"{step_name} rejected by {actor.label}")
        change.audit("approval_decided", step=step, reason=comment, before=before,
                     after=_snapshot(run, step), data={**(data or {}), "approved": approved})
        change.save()
    return run


def _waiting_approval(run: Run, step_name: str) -> Step:
    step = _step(run, step_name)
    if step.kind != d.APPROVAL or step.status != StepStatus.WAITING:
        raise TransitionNotAllowed(
            f"step {step_name} of run {run.pk} is not an approval waiting for a decision "
            f"({step.kind}, {step.status})")
    return step


def approval_timed_out(run_id: int, *, step_name: str, actor: Actor, reason: str,
                       now: datetime | None = None) -> Run:
    """Nobody decided the approval in time and its policy is to cancel: the run goes to
    attention, the step still waiting, for an operator to decide what happens."""
    now = _now(now)
    with transaction.atomic(durable=True):
        run = _lock(run_id)
        change = _Change(run, "approval_timed_out", actor, now)
        step = _waiting_approval(run, step_name)
        before = _snapshot(run, step)
        change.move(A, reason=AttentionReason.APPROVAL_TIMED_OUT,
                    message=f"{step_name}: {reason}")
        change.audit("approval_timed_out", step=step, reason=reason, before=before,
                     after=_snapshot(run, step))
        change.save()
    return run


def ask_again(run_id: int, *, step_name: str, actor: Actor, reason: str,
              now: datetime | None = None) -> Run:
    """Discard a stored model decision so the model is asked again, as a new decision
    version. Refused once a later side-effecting step has acted on the old decision
    (compensate first). The old decision stays in the audit record."""
    with _operator_transition(run_id, "ask_again", actor=actor, reason=reason, now=now,
                              step_name=step_name) as op:
        run, change, step = op.run, op.change, op.step
        before = _snapshot(run, step)
        previous = step.result
        version = step.attempt + 1
        step.status = StepStatus.PENDING
        step.result = None
        _reset_budget(step)
        change.step_changed(step)
        run.steps_done = sum(1 for s in op.steps if s.pk != step.pk and
                             s.status in DONE_STEP_STATUSES)
        run.next_wake_at = None
        change.move(Q)
        change.audit("decision_discarded", step=step, reason=reason, before=before,
                     after=_snapshot(run, step),
                     data={"previous_decision": previous, "next_version": version})
    return run


def cancel(run_id: int, *, actor: Actor, reason: str, approved_by: Actor | None = None,
           now: datetime | None = None) -> Run:
    """Stop the run at the next step boundary: at once if no step is in flight. After a
    high-impact effect it needs a second person (`approved_by`)."""
    with _operator_transition(run_id, "cancel", actor=actor, reason=reason, now=now,
                              approved_by=approved_by) as op:
        run, change = op.run, op.change
        before = _snapshot(run)
        data = _four_eyes_data(None, approved_by)
        if run.status == R:
            run.cancel_requested = True
            change.audit("cancel_requested", reason=reason, before=before, after=before,
                         data=data)
        else:
            _terminate_in(change, op.steps, reason=reason, action="cancelled", data=data)
    return run


def terminate(run_id: int, *, actor: Actor, reason: str, data: dict | None = None,
              approved_by: Actor | None = None, now: datetime | None = None) -> Run:
    """End the run at once. A step still in flight becomes unknown; its result is recorded
    when it arrives. The run resumes only through reopen. After a high-impact effect it
    needs a second person (`approved_by`)."""
    with _operator_transition(run_id, "terminate", actor=actor, reason=reason, now=now,
                              approved_by=approved_by) as op:
        _terminate_in(op.change, op.steps, reason=reason,
                      data=_four_eyes_data(data, approved_by))
    return op.run


def _terminate_in(change: _Change, steps: list[Step], *, reason: str,
                  action: str = "terminated", data: dict | None = None) -> None:
    run = change.run
    before = _snapshot(run)
    run.fencing_token += 1  # a worker still holding the run is fenced off from now on
    for step in steps:
        if step.status == StepStatus.RUNNING:
            step.status = StepStatus.UNKNOWN
            step.error_class = ErrorClass.UNKNOWN
            step.error_message = "in flight when the run was terminated"
            step.lease_owner, step.lease_expires_at = "", None
            change.step_changed(step)
        elif step.status in (StepStatus.PENDING, StepStatus.SCHEDULED):
            step.status = StepStatus.SKIPPED
            step.next_attempt_at = None
            change.step_changed(step)
    run.cancel_requested = False
    run.next_wake_at = None
    change.move(TERM, message=reason)
    change.audit(action, reason=reason, before=before, after=_snapshot(run), data=data)


def reopen(run_id: int, *, actor: Actor, reason: str, now: datetime | None = None) -> Run:
    """Bring a terminated run back to attention, from where an operator can act on it."""
    with _operator_transition(run_id, "reopen", actor=actor, reason=reason, now=now) as op:
        run, change = op.run, op.change
        before = _snapshot(run)
        for step in op.steps:
            if step.status == StepStatus.SKIPPED:
                step.status = StepStatus.PENDING
                change.step_changed(step)
        run.finished_at = None
        change.move(A, reason=AttentionReason.REOPENED, message=reason)
        change.audit("reopened", reason=reason, before=before, after=_snapshot(run))
    return run
