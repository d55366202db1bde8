"""The kernel of the state machine: the one table of allowed run transitions, the writes of
one transition to one locked run (Change: status moves checked against the table, audit
records chained from the run's head, status-change events, everything saved together), and the
small pieces every transition shares. The other modules of this package build on it."""

import contextvars
import hashlib
import json
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q

from audit.actions import AuditAction
from audit.chain import Actor, build_record
from audit.head_seals import seal_head
from audit.models import AuditRecord
from audit.quoting import quoted
from audit.redaction import outside_texts_masked, redact, redact_text

from ... import store
from ...definitions import definition
from ...models import (
    DONE_STEP_STATUSES,
    HELD_RUN_STATUSES,
    ApprovalWait,
    Run,
    RunEvent,
    RunStatus,
    Step,
    StepStatus,
)
from ..errors import EvidenceRequired, NoSuchStep, ReasonRequired, TransitionNotAllowed
from ..storable import person_text_problem
from ..wakeup import wake_after_commit, wake_all_after_commit
from .attempts import ATTEMPT_ENDS, OPEN_INTENTS, intent_of
from .in_flight import (  # noqa: F401 - the vocabulary
    IN_FLIGHT_AT_END,
    end_agent_step,
    ended_in_flight,
    release_calls_in_flight,
    taken_back,
    undos_left,
)
from .lease import Lease  # noqa: F401 - the vocabulary
from .outcome import Outcome  # noqa: F401 - the vocabulary
from .unsettled import Effect, end_or_hold, unsettled_effects  # noqa: F401 - the vocabulary
from .wait_rows import wait_began, wait_ended  # noqa: F401 - the vocabulary

NEW = "new"  # the pseudo-state of a run that does not exist yet

QUEUED, RUNNING, WAITING, ATTENTION = (RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.WAITING,
                                       RunStatus.ATTENTION)

DONE, TERM = RunStatus.COMPLETED, RunStatus.TERMINATED

COMP, COMPED, CFAIL = (RunStatus.COMPENSATING, RunStatus.COMPENSATED,
                       RunStatus.COMPENSATION_FAILED)
# States in which a worker may hold the run's lease.

HELD = HELD_RUN_STATUSES

@dataclass(frozen=True)
class Move:
    sources: frozenset
    targets: frozenset

def _move(sources, targets) -> Move:
    return Move(frozenset(sources), frozenset(targets))


# The one table of allowed run transitions: transition -> (states it may start from, states it
# may lead to). Every status change below goes through Change.move, which checks it here.
RUN_TRANSITIONS: dict[str, Move] = {
    "start": _move({NEW}, {QUEUED}),
    # A worker takes a queued run, or a waiting or compensating run whose time has come.
    "claim": _move({QUEUED, WAITING, COMP}, {RUNNING, WAITING, ATTENTION, DONE, TERM, COMP, COMPED,
                                             CFAIL}),
    # The lease holder records a step's (or a compensation's) outcome and the next intent.
    "record_outcome": _move({RUNNING, COMP}, {RUNNING, WAITING, ATTENTION, DONE, TERM, COMP, COMPED,
                                              CFAIL}),
    # The lease holder settles an unknown step after asking the remote system.
    # A resend whose budget is spent stops the run, or undoes it by policy (COMP); that
    # compensation may stop at its first undo, which a release removed, as failed (CFAIL,
    # compensation.hold_undo_missing).
    "settle_unknown": _move({RUNNING}, {RUNNING, WAITING, ATTENTION, DONE, TERM, COMP, COMPED,
                                        CFAIL}),
    # The sweeper takes a run back from a worker whose lease ran out.
    # A run whose workers keep stopping at the same point goes to a person (leases).
    "expire_lease": _move({RUNNING, COMP}, {QUEUED, COMP, ATTENTION, CFAIL}),
    "resume": _move({ATTENTION, WAITING}, {QUEUED}),
    # A person wakes a run sleeping on a timer before its time (runs.machine.transitions.timers).
    "wake_timer": _move({WAITING}, {QUEUED}),
    # The event a run waits for arrived (or a person delivered it, or skipped the wait).
    "event_received": _move({WAITING, ATTENTION}, {QUEUED}),
    "skip_event": _move({WAITING, ATTENTION}, {QUEUED}),
    # A release renamed the event (or the step) a waiting run waits for: a person decides.
    "event_wait_renamed": _move({WAITING}, {ATTENTION}),
    # A person decided an approval step the run is waiting on, or nobody did in time.
    "decide_approval": _move({WAITING}, {QUEUED, ATTENTION}),
    "approval_timed_out": _move({WAITING}, {ATTENTION}),
    "approval_unaskable": _move({WAITING}, {ATTENTION}),
    "reconcile": _move({ATTENTION}, {QUEUED, ATTENTION, TERM}),
    "retry_step": _move({ATTENTION, WAITING}, {QUEUED}),
    # Ask the model again for a stored decision: explicit, with a reason, before anything
    # acted on the old one.
    "ask_again": _move({ATTENTION, WAITING}, {QUEUED}),
    # Undo completed steps, newest first: by policy for low-impact steps, or by a person.
    "compensate": _move({ATTENTION, WAITING, CFAIL}, {COMP}),
    # Cancel stops at the next step boundary: at once when no step is in flight.
    # Ending a run while an effect's outcome is unknown leaves it in attention until each
    # such effect is settled (AttentionReason.ENDED_UNSETTLED).
    "cancel": _move({QUEUED, RUNNING, WAITING, ATTENTION}, {RUNNING, TERM, ATTENTION}),
    "terminate": _move({QUEUED, RUNNING, WAITING, ATTENTION, COMP, CFAIL}, {TERM, ATTENTION}),
    # A terminated run never resumes by accident: reopening is its own, explicit transition.
    "reopen": _move({TERM}, {ATTENTION}),
    # A person re-runs a finished or stopped run from a chosen step, as a new generation
    # (runs.machine.transitions.rerun).
    "rerun_from_step": _move({DONE, TERM, ATTENTION, COMPED, CFAIL}, {QUEUED}),
    # A person confirms the undo of a high-impact step or tool call a compensation paused at.
    "confirm_compensation": _move({ATTENTION}, {COMP}),
    # An agent step (runs.machine.transitions.agent_calls): the lease holder stores a model turn
    # (stopping for a person at an invented tool or a spent budget), checkpoints each tool
    # call's intent and outcome, settles it by key, or waits for a person's approval of it.
    # A cancel request takes effect inside the agent step, before its next model turn or
    # tool call (TERM).
    "agent_turn": _move({RUNNING}, {RUNNING, ATTENTION, TERM}),
    # A tool call that fails for good may undo the run by policy, as a step may (COMP, and
    # CFAIL at a first undo a release removed).
    "tool_call": _move({RUNNING}, {RUNNING, WAITING, ATTENTION, TERM, COMP, COMPED, CFAIL}),
    "tool_compensation": _move({COMP}, {COMP, ATTENTION}),  # paused at a high-impact undo
    "call_unworkable": _move({RUNNING, COMP}, {ATTENTION, CFAIL}),  # a release changed a tool
    "reconcile_tool_call": _move({ATTENTION}, {QUEUED, ATTENTION, TERM}),
    # A person sends one failed tool call again, or undoes one whose effect stands
    # (runs.machine.transitions.agent_operator); the undo leaves the run with the person.
    "retry_tool_call": _move({ATTENTION}, {QUEUED}),
    "compensate_tool_call": _move({ATTENTION}, {ATTENTION}),
    # A person cancels one pending or approval-waiting call; the agent goes on without it.
    "cancel_tool_call": _move({WAITING, ATTENTION}, {QUEUED, WAITING, ATTENTION}),
}

def allowed(transition: str, status: str) -> bool:
    """Whether `transition` may start from run status `status`."""
    return status in RUN_TRANSITIONS[transition].sources

def transition_time(now: datetime | None) -> datetime:
    # Leases and due times are judged by the database's clock, never a worker's.
    return now or store.current().now()

def input_hash(data) -> str:
    """The hash that tells a redelivered start event from a different one."""
    return hashlib.sha256(
        json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()

class Change:
    """The writes of one transition to one locked run: status moves checked against the
    table, audit records chained from the run's head, everything saved together."""

    def __init__(self, run: Run, transition: str | None, actor: Actor, now: datetime, *,
                 status: str | None = None):
        """`transition` None records evidence only and may not move the run."""
        self.run, self.transition, self.actor, self.now = run, transition, actor, now
        self.records: list[AuditRecord] = []
        self.events: list[RunEvent] = []
        self.steps: dict[int, Step] = {}
        self.wake_countdown: float | None = None
        self.wake = False
        # The decisions the run starts waiting on in this change (approval steps, tool
        # calls), and whether it stopped waiting on those it waited on (ApprovalWait rows).
        self.waits_begun: list[tuple[Step, object]] = []
        self.waits_ended = False
        status = run.status if status is None else status
        self.status_seen = status
        if transition is not None and not allowed(transition, status):
            raise TransitionNotAllowed(
                f"{transition} is not allowed for run {run.pk} ({run.workflow_name} "
                f"{run.business_key}) in state {status}"
            )

    def move(self, to: str, *, reason: str = "", message: str = "") -> None:
        if self.transition is None or to not in RUN_TRANSITIONS[self.transition].targets:
            raise TransitionNotAllowed(f"{self.transition} cannot lead run {self.run.pk} to {to}")
        if self.status_seen == WAITING and to != WAITING:
            # The one place a run stops waiting, whichever transition moves it (a decision,
            # a timeout, resume, retry, ask again, compensate, cancel, terminate): whatever
            # it waited on for a person is no longer waited on, its ApprovalWait rows go.
            self.waits_ended = True
            self.waits_begun.clear()
        if to != self.run.status:
            # Run.updated_at is when the status last changed: step progress within a status
            # leaves it (and so every index on it) alone, which keeps that update cheap.
            self.run.updated_at = self.now
            # The progress event, in this same transaction (the outbox of api.webhooks).
            self.events.append(RunEvent(run_id=self.run.pk, status_from=self.status_seen,
                                        status_to=to, created_at=self.now))
            self.status_seen = to
        self.run.status = to
        self.run.attention_reason = reason if to in (ATTENTION, CFAIL) else ""
        # Every status message goes through here, and some carry a person's reason (reopen,
        # terminate) or an error's text: shown on pages and lists, so no credential.
        self.run.status_message = redact_text(message) if message else ""
        if to not in HELD:
            self.run.lease_owner, self.run.lease_expires_at = "", None
        if to in (DONE, TERM, COMPED):
            self.run.finished_at = self.now
        if to == QUEUED:
            self.wake = True

    def audit(self, action: str, *, step: Step | None = None, reason: str = "",
              before=None, after=None, data=None, step_name: str = "") -> None:
        if (step is not None and action in ATTEMPT_ENDS and before
                and before.get("step_status") in OPEN_INTENTS
                and not (data and "tool_call" in data)):
            undo = before["step_status"] == StepStatus.COMPENSATING
            # The intent comes redacted (intent_of masks its texts from outside only).
            data = {**intent_of(step, undo=undo), **(redact(data) if data else {})}
        elif data:
            data = redact(data)
        # The states an effect's record gives (its row's status, with what the remote
        # system answered) are masked as its data is, by the one list of texts from outside.
        record = build_record(
            run_id=self.run.pk, head_seq=self.run.audit_seq, head_hash=self.run.audit_head,
            action=action, actor=self.actor, reason=redact_text(reason) if reason else "",
            step_name=step.name if step is not None else step_name,
            before=before and outside_texts_masked(before),
            after=after and outside_texts_masked(after), data=data or None, created_at=self.now,
        )
        self.run.audit_seq, self.run.audit_head = record.seq, record.hash
        # Sealed where the head is set, so that every path that writes the run row (the
        # checkpoint statement, the start statement, save_changes) writes the seal with it.
        self.run.audit_seal = seal_head(self.run.pk, record.seq, record.hash)
        self.records.append(record)

    def wait_for_person(self, step: Step, call=None) -> None:
        """The run, moving to waiting in this change, waits for a person's decision on
        `step` (an approval step) or on its tool call `call`: the approvals sweep finds it
        from the ApprovalWait row saved with the change."""
        self.waits_begun.append((step, call))

    @property
    def waits_changed(self) -> bool:
        return self.waits_ended or bool(self.waits_begun)

    def step_changed(self, step: Step) -> None:
        step.updated_at = self.now
        self.steps[step.pk] = step

    def save(self) -> None:
        save_changes([self])

RUN_FIELDS = [
    "status", "attention_reason", "status_message", "current_step", "steps_done",
    "cancel_requested", "fencing_token", "lease_owner", "lease_expires_at", "heartbeat_at",
    "next_wake_at", "audit_seq", "audit_head", "audit_seal", "updated_at", "finished_at",
]

STEP_FIELDS = [
    "status", "attempt", "budget_attempt_base", "budget_started_at", "format_failures",
    "lookup_failures", "intended_action", "approved_attempt",
    "compensation_attempt", "compensation_ref",
    "remote_ref", "result", "error_class", "error_message", "next_attempt_at", "lease_owner",
    "lease_expires_at", "started_at", "attempt_started_at", "finished_at", "updated_at",
]

def save_changes(changes: list[Change]) -> None:
    """Save the changes of one run or of many (the sweeper takes runs back in batches), in
    the caller's transaction (one statement per table on PostgreSQL, runs.store)."""
    steps = [step for change in changes for step in change.steps.values()]
    runs = [change.run for change in changes]
    records = [r for change in changes for r in change.records]
    events = [e for change in changes for e in change.events]
    db = store.current()
    db.update_rows(Step, steps, STEP_FIELDS)
    db.insert_rows(AuditRecord, records)
    db.insert_rows(RunEvent, events)
    db.update_rows(Run, runs, RUN_FIELDS)
    save_waits(changes)
    wake_all_after_commit([change.run.pk for change in changes if change.wake])
    for change in changes:
        if not change.wake and change.wake_countdown is not None:
            wake_after_commit(change.run.pk, countdown=change.wake_countdown)

def save_waits(changes: list[Change]) -> None:
    """In the caller's transaction: the ApprovalWait rows of runs that stopped waiting go,
    those of the decisions runs started waiting on are inserted. Nothing is written (no
    statement sent) for a change that did neither, the common case."""
    ended = [change.run.pk for change in changes if change.waits_ended]
    if ended:
        ApprovalWait.objects.filter(run_id__in=ended).delete()
    begun = [ApprovalWait(run_id=change.run.pk, step_name=step.name, tool_call=call,
                          created_at=change.now)
             for change in changes for step, call in change.waits_begun]
    if begun:
        ApprovalWait.objects.bulk_create(begun)

# Short retries also get a delayed wake-up hint so they need not wait for the sweeper; the
# database row (next_wake_at) stays the source of truth, so a lost hint loses nothing.

MAX_HINT_COUNTDOWN = 30.0

def lock_run(run_id: int) -> Run:
    held = _held_by_caller.get()
    if held and held[0].pk == run_id:
        return held.pop()
    run = store.current().lock_run(run_id)
    if run is None:
        raise TransitionNotAllowed(f"run {run_id} does not exist")
    return run

def steps_of(run: Run) -> list[Step]:
    return list(Step.objects.filter(run=run).order_by("position"))

def step_named(run: Run, name: str) -> Step:
    try:
        return Step.objects.get(run=run, name=name)
    except Step.DoesNotExist:
        raise NoSuchStep(f"run {run.pk} has no step {quoted(name)}") from None

def steps_done_with(run: Run, step: Step, steps: list[Step] | None = None) -> int:
    """How many steps are done once `step` (being settled now) counts as done. `steps`: the
    run's steps as the transition read them (not read again); else counted by the database."""
    if steps is None:
        return Step.objects.filter(Q(pk=step.pk) | Q(status__in=list(DONE_STEP_STATUSES)),
                                   run=run).count()
    return sum(1 for s in steps if s.pk == step.pk or s.status in DONE_STEP_STATUSES)

def require_reason(reason: str, what: str) -> None:
    # Every operator transition calls this first, before any lock is taken: a refusal
    # writes nothing, whichever caller (console, API, CLI, a second person's approval) it is.
    if not isinstance(reason, str) or not reason.strip():
        raise ReasonRequired(f"{what} needs a reason")
    if (problem := person_text_problem(reason)) is not None:
        raise ReasonRequired(f"{what}: the reason is {problem}")

def require_evidence(verdict, evidence: str, what: str) -> None:
    # Settling an outcome is evidence in the audit log: a lookup by key says what it asked
    # and got, a person what they checked. Refused before any lock, like a missing reason.
    if isinstance(verdict, (definition.Found, definition.NotFound)) and not (evidence
                                                                             or "").strip():
        raise EvidenceRequired(f"{what}: settling an outcome as found or not found needs "
                               "the evidence for it")
    if evidence and (problem := person_text_problem(evidence)) is not None:
        raise EvidenceRequired(f"{what}: the evidence is {problem}")


def restart_retry_budget(step: Step) -> None:
    # The next claim is the budget's first attempt, and its elapsed time runs from there.
    step.budget_attempt_base, step.budget_started_at = step.attempt, None

def reset_budget(step: Step) -> None:
    restart_retry_budget(step)
    step.format_failures, step.lookup_failures, step.next_attempt_at = 0, 0, None

def audit_state(run: Run, step: Step | None = None) -> dict:
    snap = {"status": run.status}
    if run.attention_reason:
        snap["attention_reason"] = run.attention_reason
    if step is not None:
        snap["step_status"] = step.status
    return snap


def held_status(run: Run) -> str:
    """Where a run that nothing can work waits for a person: a run that was undoing its
    steps waits as compensation failed, so that going on undoes, never runs forward."""
    return CFAIL if run.status == COMP else ATTENTION

def lease_until(now: datetime) -> datetime:
    return now + timedelta(seconds=settings.RUNS_LEASE_SECONDS)

def extend_lease(run: Run, now: datetime) -> bool:
    """Whether the lease is renewed by this change (the statement that writes it stamps the
    expiry from the database's clock, runs.store).

    Renewed once half of it is used up rather than at every step: lease_expires_at is
    indexed, and leaving it alone lets PostgreSQL update the run row in place."""
    run.heartbeat_at = now
    remaining = settings.RUNS_LEASE_SECONDS / 2
    if run.lease_expires_at is None or (run.lease_expires_at - now).total_seconds() < remaining:
        run.lease_expires_at = lease_until(now)
        return True
    return False

def definition_step(lease: Lease, step: Step) -> definition.StepDef:
    return lease.definition.step(step.name)

def fenced(run: Run, lease: Lease) -> bool:
    return run.fencing_token != lease.token or run.status not in HELD

def halt(change: Change, lease: Lease, step: Step, before: dict, to: str, reason: str,
          message: str, error: str, action: str = AuditAction.ATTENTION) -> None:
    """Stop the lease holder's work and leave the run for a person, saying why."""
    change.move(to, reason=reason, message=message)
    change.audit(action, step=step, before=before, after=audit_state(change.run, step),
                 data={"error": error})
    lease.finished, lease.work = True, None

def end_waits(change: Change, steps: list[Step], *,
              kinds: tuple[str, ...] = (definition.SLEEP,)) -> None:
    """The one rule for the waits of a run that stops going forward: a waiting step of
    `kinds` is skipped, as a step the run never reached is, its wake time cleared. A sleep
    waits for nothing but its time, so any end skips it: no wake time is left pending, and
    a reopened run sleeps anew. A run a person ends keeps its event wait: an event arriving
    for it is refused for that run by the wait it still holds, and a reopen waits on with
    its timeout (runs.waiting.kept); a compensation ends it too (begin_compensation), as
    no event may send a run being undone forward. An approval wait is never ended here:
    the approvals sweep withdraws its request, saying why (approvals.withdrawal). A wait kept
    so still reads `waiting`: its readers say it ended with the run (runs.machine.endings)."""
    for step in steps:
        if step.kind in kinds and step.status == StepStatus.WAITING:
            # Skipped unfinished, as the run's end leaves it: a reopen waits anew.
            step.status, step.next_attempt_at, step.finished_at = StepStatus.SKIPPED, None, None
            change.step_changed(step)

def terminate_in(change: Change, steps: list[Step], *, reason: str,
                  action: str = AuditAction.TERMINATED, data: dict | None = None) -> None:
    run = change.run
    before = audit_state(run)
    run.fencing_token += 1  # a worker still holding the run is fenced off from now on
    # Nothing carries a compensation on in an ended run: no undo is left under way.
    undos = undos_left(change, steps)
    for step in steps:
        if step.kind == definition.AGENT and step.status not in DONE_STEP_STATUSES:
            end_agent_step(change, step, action=action)
        elif step.status == StepStatus.RUNNING:
            ended_in_flight(step, step.kind, IN_FLIGHT_AT_END)
            step.lease_owner, step.lease_expires_at = "", None
            change.step_changed(step)
        elif step.status in (StepStatus.PENDING, StepStatus.SCHEDULED):
            # Skipped unfinished (an earlier attempt may have dated it): what tells a reopen
            # the end skipped it, not a person (reopen).
            step.status = StepStatus.SKIPPED
            step.next_attempt_at, step.finished_at = None, None
            change.step_changed(step)
    end_waits(change, steps)
    run.cancel_requested = False
    run.next_wake_at = None
    unsettled = unsettled_effects(steps)
    if unsettled:
        data = {**(data or {}), "unsettled": [str(e) for e in unsettled]}
    if undos:
        data = {**(data or {}), "undos_left": undos}
    end_or_hold(change, unsettled, message=reason)
    change.audit(action, reason=reason, before=before, after=audit_state(run), data=data)

_joined = contextvars.ContextVar("runs_transition_joined", default=False)
# The run row the caller locked, taken (once) by the first transition on it.
_held_by_caller: contextvars.ContextVar[list[Run] | None] = contextvars.ContextVar(
    "runs_transition_held_by_caller", default=None)


@contextmanager
def within_caller_transaction(locked: Run | None = None):
    """Run the transitions called inside in the caller's open transaction (a savepoint
    each) rather than in their own durable one: approvals apply a decision to the run in the
    transaction that records the decision, so one is never committed without the other.
    The caller locks the run before anything else, as every transition does. `locked`: that
    row, read with select_for_update in this transaction (an operator action locks it with
    its permission check): the first transition on it takes it instead of reading it again;
    any later one reads it again, since a refused transition may leave the row changed."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("within_caller_transaction needs an open transaction")
    token = _joined.set(True)
    held = _held_by_caller.set([locked] if locked is not None else [])
    try:
        yield
    finally:
        _held_by_caller.reset(held)
        _joined.reset(token)


@contextmanager
def transition_on(run_id: int, transition: str, *, actor: Actor, now: datetime | None,
                  refused: Callable[[Run], str | None] | None = None):
    """The skeleton of a transition on an existing run: in one durable transaction, lock the
    run, check `transition` may start from its state, let the body change it, save everything.
    If the body raises, nothing is written. `refused`: why the locked run refuses it, in the
    caller's words (a person's action: operator_rules.state_refusal), asked before the
    table's check, whose words name the transition as the code does."""
    with store.current().transaction(durable=not _joined.get()):
        run = lock_run(run_id)
        if refused is not None and (words := refused(run)) is not None:
            raise TransitionNotAllowed(words)
        change = Change(run, transition, actor, transition_time(now))
        yield change
        change.save()
