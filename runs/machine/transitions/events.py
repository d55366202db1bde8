"""The transitions of an event wait: the run starts waiting for an external event (from the
lease holder's advance), the event arrives (or a person delivers it, or skips the wait), or
the wait times out and its policy applies.

A waiting step's remote_ref names what it waits for ("awaiting-event:<event>:<key>"), so an
arriving event finds its run along step_remote_ref_idx; once delivered it names the event
("event:<source>:<id>"), the evidence. The event's row is written in the transaction of the
transition that consumes it: a redelivered event (same source and id) changes nothing.

A wait's `correlate` is the workflow's own code, called with the run's input when the run
is started (a start it fails is refused) and again when the run reaches the step
(runs.machine.transitions.wait_functions): a release can make it fail for older runs, or give
a key no event could carry. The step then fails in that same change
(timers.failed_in_its_code), as a sleep's `until` that fails does. A timeout whose deadline
the database cannot hold fails the step, as a sleep's wake time does.

A release can also rename the event a running run waits for (or the step that waits), with
no new version: the row still waits under the old name, which no sender uses any more, and
an event under the new name finds no run. renamed_wait says so; such a run is held for a
person (hold_renamed_wait, or at its claim), never given an event on a guess.

A run a person ended takes no event on its own (run_ended): deliver_event refuses it, and an
event that comes for it is kept refused for that run (refused_events), so that
reopening the run does not hand it an event nobody delivered; a person may.
"""

import hashlib
from datetime import datetime

from django.db import IntegrityError, transaction
from django.db.models import Q

from audit.actions import AuditAction
from audit.chain import Actor
from audit.redaction import redact

from ... import store
from ...definitions import definition
from ...models import AttentionReason, ExternalEvent, Run, Step, StepStatus
from ...world_models import UNSETTLED
from ..errors import TransitionNotAllowed
from .kernel import (  # the package's shared vocabulary
    ATTENTION,
    QUEUED,
    WAITING,
    Change,
    Lease,
    audit_state,
    definition_step,
    halt,
    held_status,
    step_named,
    steps_done_with,
    transition_on,
    wait_began,
    wait_ended,
)
from .operator import operator_transition
from .refused_events import run_ended
from .timers import after, counted_from, failed_for_its_time, failed_in_its_code, reached
from .wait_functions import TimeNotKept, WaitFunctionFailed, correlation_key

AWAITING = "awaiting-event:"


class DuplicateEvent(Exception):
    """This event (source and id) was received before: nothing changed."""


# What the waiting step's remote_ref column holds (runs.models.Step.remote_ref).
REF_LENGTH = 300
# A key too long to name in full beside its event is named by its digest (KEY_DIGEST + hex).
KEY_DIGEST = "sha256="


def awaiting_ref(event: str, key: str) -> str:
    """What a step waiting for `event` with correlation key `key` holds in remote_ref: the
    event and the key, or the key's sha256 where both would not fit (a business key of 300
    characters does not beside its event's name; the checkpoint failed on it, and the run
    went round its lease again and again)."""
    ref = f"{AWAITING}{event}:{key}"
    if len(ref) <= REF_LENGTH:
        return ref
    return f"{AWAITING}{event}:{KEY_DIGEST}{hashlib.sha256(key.encode()).hexdigest()}"


def evidence_ref(source: str, event_id: str) -> str:
    """What a step that received an event holds in remote_ref: "event:<source>:<id>", or the
    id's sha256 where both would not fit (a source of 100 characters and an id of 200)."""
    ref = f"event:{source}:{event_id}"
    if len(ref) <= REF_LENGTH:
        return ref
    return f"event:{source}:{KEY_DIGEST}{hashlib.sha256(event_id.encode()).hexdigest()}"


# What ExternalEvent.event_id holds (runs.world_models).
EVENT_ID_LENGTH = 200


def by_hand_event_id(run_id: int, step_name: str, now: datetime) -> str:
    """The id of an event a person delivers: the run, the step and the moment, with the
    step named by its sha256 where its name is too long for the column (a step's name may
    be 200 characters)."""
    event_id = f"run-{run_id}-{step_name}-{now.timestamp()}"
    if len(event_id) <= EVENT_ID_LENGTH:
        return event_id
    digest = hashlib.sha256(step_name.encode()).hexdigest()
    return f"run-{run_id}-{KEY_DIGEST}{digest}-{now.timestamp()}"


def shortest_digested_key(event: str) -> int:
    """The length from which a key is named by its digest in a wait for `event`."""
    return REF_LENGTH - len(AWAITING) - len(event)


def awaits(change: Change, lease: Lease, step: Step) -> bool:
    """From advance: the run waits for the step's event (True), or the wait is over by its
    timeout policy "continue" (False: the step succeeded with the default, go on)."""
    run, now = change.run, change.now
    spec = definition_step(lease, step)
    if step.status != StepStatus.WAITING:
        try:
            key = correlation_key(spec, run.input, run.business_key)
        except WaitFunctionFailed as exc:
            failed_in_its_code(change, lease, step, exc)
            return True
        try:
            until = after(counted_from(lease, now), spec.timeout) if spec.timeout else None
        except TimeNotKept as exc:
            failed_for_its_time(change, lease, step, "its event timeout", exc)
            return True
        before = audit_state(run, step)
        wait_began(step, now)
        step.remote_ref = awaiting_ref(spec.event_name, key)
        step.next_attempt_at = until
        change.step_changed(step)
        change.audit(AuditAction.EVENT_AWAITED, step=step, before=before,
                     after={"step_status": step.status},
                     data={"event": spec.event_name, "key": key,
                           "until": step.next_attempt_at.isoformat()
                           if step.next_attempt_at else None})
    elif (renamed := renamed_wait(step, lease.definition)) is not None:
        # Resumed (or timed out) under code that waits elsewhere: neither the wait nor its
        # timeout policy is what the code now says; a person decides.
        held_at_renamed_wait(change, step, lease.definition, renamed)
        lease.finished, lease.work = True, None
        return True
    elif step.next_attempt_at is not None and reached(lease, step.next_attempt_at, now):
        return _timed_out(change, lease, step, spec)
    change.move(WAITING, message=waiting_message(step, spec))
    run.next_wake_at = step.next_attempt_at
    lease.finished, lease.work = True, None
    return True


def waiting_message(step: Step, spec: definition.StepDef) -> str:
    key = awaited(step)[1]
    since = f" since {step.started_at:%Y-%m-%d %H:%M:%S %Z}" if step.started_at else ""
    until = (f", until {step.next_attempt_at:%Y-%m-%d %H:%M:%S %Z}"
             if step.next_attempt_at else "")
    return f"{step.name}: waits for the event {spec.event_name} ({key}){since}{until}"


def _timed_out(change: Change, lease: Lease, step: Step, spec: definition.StepDef) -> bool:
    run, now = change.run, change.now
    before = audit_state(run, step)
    waited = f"no {spec.event_name} event arrived by {step.next_attempt_at:%Y-%m-%d %H:%M %Z}"
    step.next_attempt_at = None
    if spec.on_timeout == "continue":
        # The next steps read the declared default as the step's result, as an event's
        # payload would be (definition.wait_for_event); that no event came is the audit
        # record's to say, not a wrapper around the value.
        step.status = StepStatus.SUCCEEDED
        step.result = redact(spec.default)
        step.remote_ref = ""
        step.finished_at = now
        wait_ended(step)
        change.step_changed(step)
        # The lease holds the run's steps: read again, every timed-out wait of a run of
        # thousands of steps read all their rows.
        run.steps_done = steps_done_with(run, step, lease.steps)
        change.audit(AuditAction.EVENT_TIMED_OUT, step=step, before=before,
                     after=audit_state(run, step),
                     data={"policy": "continue", "timed_out": True, "waited": waited})
        return False
    if spec.on_timeout == "fail":
        step.status = StepStatus.FAILED
        step.remote_ref = ""
        step.error_message = waited
    # "escalate": still waiting, now for a person (who may deliver or skip) or a late event.
    change.step_changed(step)
    halt(change, lease, step, before, ATTENTION, AttentionReason.EVENT_TIMED_OUT,
          f"{step.name}: {waited}", waited, action=AuditAction.EVENT_TIMED_OUT)
    return True


def awaited(step: Step) -> tuple[str, str]:
    """What a waiting step's row waits for (its remote_ref, awaiting_ref's), whatever its
    code says: the event, and the key as the ref names it (a long one by its digest)."""
    event, _, key = step.remote_ref.removeprefix(AWAITING).partition(":")
    return event, key


def awaited_event(step: Step) -> str:
    """The event a waiting step's row waits for."""
    return awaited(step)[0]


def renamed_wait(step: Step, workflow_def: definition.Workflow | None) -> str | None:
    """Why the code of `step`'s run (`workflow_def`, its version in this worker) no longer
    waits where the step's row waits, as the message that holds the run; None if it does.
    A release renamed the step's event, or the step, under the running run: the old name is
    what the row (and the key an event finds it by) says, the new one what the code says."""
    if step.status != StepStatus.WAITING or not step.remote_ref.startswith(AWAITING):
        return None
    waits_for = awaited_event(step)
    if workflow_def is None:  # its claim holds it too, but only at its timeout (weeks away)
        name = f"{step.run.workflow_name} v{step.run.workflow_version}"
        return (f"{step.name}: waits for the event {waits_for}, but {name} is not registered "
                "in this worker: a release removed it under this run and nothing was "
                f"delivered to it. Deploy the code that waits there for {waits_for}, resume, "
                "and have the event sent again")
    spec = declared_wait(workflow_def, step)
    if spec is not None and spec.event_name == waits_for:
        return None
    name = f"{workflow_def.name} v{workflow_def.version}"
    if spec is not None:
        there = f"has it wait for the event {spec.event_name}"
        # The new name's schema checks a payload a person delivers.
        act = "deliver the event by hand or skip it"
    else:
        others = [s.name for s in workflow_def.steps
                  if s.kind == definition.EVENT and s.event_name == waits_for]
        there = f"has no event step {step.name}" + (
            f" (its step {', '.join(others)} waits for {waits_for})" if others else "")
        # Without the step no schema checks a payload: a person can only skip.
        act = "skip the event"
    return (f"{step.name}: waits for the event {waits_for}, but {name} in this worker {there}: "
            "a release renamed it under this run and nothing was delivered to it. Either "
            f"{act}, or deploy the code that waits there for {waits_for} and resume")


def declared_wait(workflow_def: definition.Workflow, step: Step) -> definition.StepDef | None:
    """The event wait `workflow_def` declares under `step`'s name, if it does."""
    spec = definition.step_of(workflow_def, step.name)
    return spec if spec is not None and spec.kind == definition.EVENT else None


def hold_renamed_wait(run_id: int, *, step_name: str, actor: Actor,
                      now: datetime | None = None) -> Run:
    """An event showed that a run waits where its code no longer does (renamed_wait): it is
    held for a person, the step still waiting under its old name so that a person may
    deliver or skip it. TransitionNotAllowed (nothing written) if it no longer waits so."""
    with transition_on(run_id, "event_wait_renamed", actor=actor, now=now) as change:
        run = change.run
        step = step_named(run, step_name)
        workflow_def = definition.registry.get(run.workflow_name, run.workflow_version)
        renamed = renamed_wait(step, workflow_def) if step.kind == definition.EVENT else None
        if renamed is None:
            raise TransitionNotAllowed(f"step {step_name} of run {run.pk} waits where its "
                                       "code does: nothing to hold")
        held_at_renamed_wait(change, step, workflow_def, renamed)
    return run


def held_at_renamed_wait(change: Change, step: Step,
                         workflow_def: definition.Workflow | None, renamed: str) -> None:
    """The one hold of a run whose wait a release renamed (renamed_wait says why), whoever
    finds it: an event (hold_renamed_wait) or the run's claim (awaits). The step still
    waits under its old name, so that a person may deliver or skip it."""
    run = change.run
    before = audit_state(run, step)
    declared = declared_wait(workflow_def, step) if workflow_def is not None else None
    run.next_wake_at = None
    change.move(held_status(run), reason=AttentionReason.DEFINITION_MISSING, message=renamed)
    change.audit(AuditAction.DEFINITION_MISSING, step=step, before=before,
                 after=audit_state(run, step),
                 data={"error": renamed, "waits_for": awaited_event(step),
                       "declared": declared.event_name if declared else None})


def waiting_event_step(steps: list[Step]) -> Step | None:
    """The event step a run waits on, if it does."""
    return next((s for s in steps if s.kind == definition.EVENT and s.status == StepStatus.WAITING),
                None)


def deadline_passed(step: Step, now: datetime) -> bool:
    """Whether event wait `step` is past its deadline by `now` (the database's clock). Then
    the wait's policy decides, as it would have had a worker come by in time, and no event
    is delivered on its own: it is kept (a person may still deliver it by hand; "escalate"
    clears the deadline, and the kept event is taken then)."""
    return step.next_attempt_at is not None and step.next_attempt_at <= now


def deliver_event(run_id: int, *, step_name: str, source: str, event_id: str, payload: dict,
                  actor: Actor, kept: ExternalEvent | None = None, digests: dict | None = None,
                  now: datetime | None = None) -> Run:
    """The awaited event arrived: in one transaction, its row is written (or the kept row
    is marked consumed), the step succeeds with the payload and the run is queued.
    Raises DuplicateEvent (nothing written) if this event was received before (or `kept`
    was refused for a run), and TransitionNotAllowed if the run no longer waits for it or a
    person ended it (run_ended). `digests`: the new row's payload_digests (runs.waiting.events)."""
    given = now
    with transition_on(run_id, "event_received", actor=actor, now=now) as change:
        run, now = change.run, change.now
        # A terminated run the table refuses already; one held only to settle its effects
        # is in attention, from which a late event may otherwise send a run on.
        if (why := run_ended(run)) is not None:
            raise TransitionNotAllowed(f"{why}: it takes no event on its own")
        step = _waiting_event(run, step_name)
        # By the database's clock, read as the run was locked (a caller's given time aside):
        # this process's estimate of it runs ahead or behind for a while after its own clock
        # stepped, and would keep an event that came in time, or deliver one that came late.
        if deadline_passed(step, store.time_of_lock(run, given=given)):
            raise TransitionNotAllowed(
                f"step {step.name} waited for its event until "
                f"{step.next_attempt_at:%Y-%m-%d %H:%M:%S %Z}: its timeout decides")
        _store_event(run, step, source=source, event_id=event_id, payload=payload,
                     kept=kept, now=now, digests=digests)
        _received(change, step, payload, ref=evidence_ref(source, event_id),
                  data={"source": source, "event_id": event_id})
    return run


def _store_event(run: Run, step: Step, *, source: str, event_id: str, payload: dict,
                 kept: ExternalEvent | None, now: datetime, digests: dict | None = None) -> None:
    event, key = awaited(step)
    if kept is not None:
        # Refused for a run (its version's schema, or the run had ended when it came), it
        # is a person's to deliver: no path hands it to a run on its own. Past its keep time
        # (runs.waiting.kept_expiry), marked expired or not yet, it is nobody's.
        taken = ExternalEvent.objects.filter(
            within_keep_time(now), pk=kept.pk, refused_at__isnull=True,
        ).update(consumed_run_id=run.pk, consumed_step=step.name, consumed_at=now)
        if taken != 1:
            raise DuplicateEvent(f"event {source}:{event_id} was consumed, refused or expired "
                                 "already")
        return
    try:
        with transaction.atomic():
            insert_event(workflow_name=run.workflow_name, source=source, event_id=event_id,
                         event_name=event, correlation_key=key, payload=redact(payload),
                         received_at=now, consumed_run_id=run.pk, consumed_step=step.name,
                         consumed_at=now, **(digests or {}))
    except IntegrityError:
        raise DuplicateEvent(f"event {source}:{event_id} was received before") from None


def within_keep_time(now: datetime) -> Q:
    """Kept events still kept at `now`: neither consumed nor expired, their keep time not past
    (a row an older release kept without keep_until is kept until the sweeper gives it one)."""
    return UNSETTLED & (Q(keep_until__isnull=True) | Q(keep_until__gt=now))


def insert_event(**fields) -> ExternalEvent:
    """Insert an event's row (kept, or consumed by the transition that writes it) with the
    reference of the wait it is for, awaiting_ref's: the one form by which a run that begins
    to wait, the sweeper's pass and a person's delivery find a kept event (the step holds
    the same in remote_ref). IntegrityError if its source and id were received before."""
    return ExternalEvent.objects.create(
        **fields, awaited_ref=awaiting_ref(fields["event_name"], fields["correlation_key"]))


def _received(change: Change, step: Step, payload, *, ref: str, data: dict,
              reason: str = "", steps: list[Step] | None = None) -> None:
    _end_wait(change, step, StepStatus.SUCCEEDED, AuditAction.EVENT_RECEIVED,
              result=redact(payload), ref=ref, reason=reason, data=data, steps=steps)


def _end_wait(change: Change, step: Step, status: str, action: str, *, result=None,
              ref: str = "", reason: str = "", data: dict | None = None,
              steps: list[Step] | None = None) -> None:
    """The one way an event wait ends (received, delivered by hand, skipped): the step takes
    `status` and the run goes on."""
    run = change.run
    before = audit_state(run, step)
    step.status = status
    if result is not None:
        step.result = result
    step.remote_ref = ref
    step.next_attempt_at = None
    step.finished_at = change.now
    wait_ended(step)
    change.step_changed(step)
    run.steps_done = steps_done_with(run, step, steps)
    run.next_wake_at = None
    change.move(QUEUED)
    change.audit(action, step=step, reason=reason, before=before,
                 after=audit_state(run, step), data=data)


def _waiting_event(run: Run, step_name: str) -> Step:
    step = step_named(run, step_name)
    if step.kind != definition.EVENT or step.status != StepStatus.WAITING:
        raise TransitionNotAllowed(f"step {step_name} of run {run.pk} does not wait for an "
                                   f"event ({step.kind}, {step.status})")
    return step


def deliver_event_by_hand(run_id: int, *, payload: dict, actor: Actor, reason: str,
                          now: datetime | None = None) -> Run:
    """A person delivers the awaited event (what the other system should have sent), with a
    reason; recorded as an event of source "operator". It settles the wait: the events kept
    for it are consumed by this delivery (_settle_kept)."""
    with operator_transition(run_id, "event_received", actor=actor, reason=reason,
                             now=now) as op:
        step = waiting_event_step(op.steps)
        event_id = by_hand_event_id(op.run.pk, step.name, op.change.now)
        # Before the step stops waiting: what it waits for is read from its row.
        settled = _settle_kept(op.run, step, op.definition, op.change.now)
        _store_event(op.run, step, source="operator", event_id=event_id, payload=payload,
                     kept=None, now=op.change.now)
        data = {"source": "operator", "by_hand": True}
        if settled:
            data["kept_settled"] = settled
        _received(op.change, step, payload, ref=evidence_ref("operator", event_id),
                  data=data, reason=reason, steps=op.steps)
    return op.run


def _settle_kept(run: Run, step: Step, workflow_def: definition.Workflow | None,
                 now: datetime) -> list[str]:
    """The kept events this wait would have consumed, marked consumed by a person who ends
    it (a delivery by hand or a skip, in its transaction): otherwise one stays kept and a
    later wait for it (a re-run from this step) receives it as if it came for that wait.
    Those past their keep time are not this run's: they expire (runs.waiting.kept_expiry).
    Returns them as "source:id"."""
    # Along external_event_kept_ref_idx; locked, so that a consume_kept of one of them (for
    # another run of the same key) waits for this person's change and then finds it consumed.
    kept = list(ExternalEvent.objects.select_for_update().filter(
        within_keep_time(now), workflow_name=run.workflow_name,
        awaited_ref__in=_wait_refs(run, step, workflow_def),
        # Not one that came while this run was ended (runs.waiting.kept.pass_over): it was
        # kept for the next run that waits under its key.
        refused_at__isnull=True).exclude(refused_run_id=run.pk).order_by("pk"))
    ExternalEvent.objects.filter(pk__in=[e.pk for e in kept]).update(
        consumed_run_id=run.pk, consumed_step=step.name, consumed_at=now)
    return [f"{e.source}:{e.event_id}" for e in kept]


def _wait_refs(run: Run, step: Step, workflow_def: definition.Workflow | None) -> list[str]:
    """The references of the kept events a waiting step would consume: the one it waits
    under and, if a release renamed its event (renamed_wait), the one under the new name with
    the same key (an event the sender sent under that name was kept, finding no run)."""
    refs = [step.remote_ref]
    declared = declared_wait(workflow_def, step) if workflow_def is not None else None
    if declared is None or declared.event_name == awaited_event(step):
        return refs
    try:
        key = correlation_key(declared, run.input, run.business_key)
    except WaitFunctionFailed:
        return refs  # no key to name: nothing under the new name is taken on a guess
    if awaiting_ref(awaited_event(step), key) == step.remote_ref:  # the key it waits with
        refs.append(awaiting_ref(declared.event_name, key))
    return refs


def skip_event(run_id: int, *, actor: Actor, reason: str, now: datetime | None = None) -> Run:
    """A person ends the wait without the event: the step is skipped, the run goes on. It
    settles the wait as a delivery by hand does: the events kept for it are consumed by this
    skip (_settle_kept)."""
    with operator_transition(run_id, "skip_event", actor=actor, reason=reason,
                             now=now) as op:
        run = op.run
        step = waiting_event_step(op.steps)
        # Before the step stops waiting: what it waits for is read from its row.
        settled = _settle_kept(run, step, op.definition, op.change.now)
        _end_wait(op.change, step, StepStatus.SKIPPED, AuditAction.EVENT_SKIPPED,
                  reason=reason, data={"kept_settled": settled} if settled else None,
                  steps=op.steps)
    return run
