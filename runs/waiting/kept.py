"""Kept events: an event that came before its run waited for it (runs.waiting.events keeps
it) is delivered once the run waits: by the run itself as it begins to wait
(consume_kept_for_run, after the worker let go of it), or by the sweeper's pass over the kept
rows (consume_kept_events), the backstop for an event and a wait that crossed, or for a
worker lost between the two. Only within its keep time: one past it expires instead, by
whichever path meets it first (runs.waiting.kept_expiry), and is never delivered.

A kept row names the wait it is for in awaited_ref (transitions.events.awaiting_ref, written
with the row): each lookup compares that with a waiting step's remote_ref, in Python and in
SQL alike. A kept event that its run's version refuses (the payload fails that version's
schema) is marked refused by whichever path meets it first, said once (refuse_kept: on the
run's log and at WARNING), and not tried again: the run waits on, for a person or an event
it accepts.

A kept event that came for a run a person had ended (transitions.refused_events.run_ended) is
not that run's on its own: reopening the run does not hand it over, with nobody having
delivered it; a person may (Deliver event names them). Whose it is then, its key says
(not_for_ended). A wait that correlates by the run's business key names that one run: the
event is marked refused for it, as one its version refuses is (refuse_for_ended), by the
door as it keeps it (the run found by the wait it still holds, or by its business key where
it had not reached the wait) or by the first look that meets it. A key that a wait's own
correlate() gave names no run (it may give the same key to many): the event stays kept,
within its keep time, for the next run that waits under the key, as an early event is, and
is only passed over by the ended run (pass_over: refused_run_id names it, refused_at stays
empty).
"""

import logging
from datetime import datetime

from django.db.models import BooleanField, Exists, ExpressionWrapper, OuterRef, Q
from django.utils import timezone

from audit.chain import Actor

from .. import store
from ..definitions import definition
from ..machine.errors import TransitionNotAllowed
from ..machine.transitions import (
    DuplicateEvent,
    awaiting_ref,
    deliver_event,
    hold_renamed_wait,
    renamed_wait,
)
from ..machine.transitions.events import awaited_event
from ..machine.transitions.kernel import transition_time
from ..machine.transitions.refused_events import (
    refuse_for_ended_run,
    refuse_kept_event,
    run_ended,
)
from ..machine.wakeup import send_wakeup
from ..models import ExternalEvent, PassPosition, Run, RunStatus, Step, StepStatus
from ..world_models import EVENT_STATES, UNSETTLED
from .kept_expiry import expire_kept, past_its_time
from .payloads import EventRefused, event_steps, for_run, one_schema

logger = logging.getLogger(__name__)


def waiting_step(workflow: str, ref: str, *, now: datetime | None = None,
                 passing_over: int | None = None) -> Step | None:
    """The step of `workflow` that waits under `ref` (awaiting_ref's), if its run's code
    still has it wait there; a run whose code no longer does is held for a person (and None
    returned).

    A wait whose timeout has passed by the database's clock (`now`) waits no more, even if
    no worker has applied its policy yet (every worker down, a queue behind): an event that
    comes after the deadline is kept, as for any run not waiting, and the policy decides as
    it would have at the deadline ("escalate" leaves the step waiting, without a deadline,
    and the kept event is then delivered). Otherwise the outcome would depend on how soon a
    worker came by: "fail" or "continue" for the same late event, or its payload.

    Of several runs waiting under `ref` (a correlate() that gives one key to many), the
    oldest that listens: one a person ended (run_ended) still holds its wait, and an event
    that some run still waits for is not refused for it. Only where every run waiting there
    was ended is the ended one's step returned (whose the event is then: not_for_ended).
    The run `passing_over` names (a kept event's refused_run_id: it came while that run was
    ended, pass_over) is not looked at."""
    if not ref:
        return None  # a row kept by a release before awaited_ref, not filled yet
    # Along step_remote_ref_idx: the step names what it waits for.
    waits = (Step.objects.filter(remote_ref=ref, kind=definition.EVENT,
                                 status=StepStatus.WAITING, run__workflow_name=workflow)
             .select_related("run").order_by("pk"))
    if passing_over is not None:
        waits = waits.exclude(run_id=passing_over)
    # Whether each deadline has passed, by the database's clock (a caller's given time
    # aside), as deliver_event judges it: not this process's estimate of that clock.
    waits = waits.annotate(past_deadline=ExpressionWrapper(
        Q(next_attempt_at__lte=store.time_in_statement(now)), output_field=BooleanField()))
    step = _listening(waits)
    if step is None or not _renamed(step):
        return step
    return None


# Runs read at a time while looking for the one that listens among those waiting under one
# key (nearly always one).
WAITS_CHUNK = 100


def _listening(waits) -> Step | None:
    """Of the waiting steps `waits` (by id) not past their deadline (past_deadline, the
    rule deliver_event holds), the first whose run a person did not end; else the first,
    ended; None if there is none."""
    first, after = None, 0
    while True:
        chunk = list(waits.filter(pk__gt=after)[:WAITS_CHUNK])
        open_waits = [s for s in chunk if not s.past_deadline]
        listening = next((s for s in open_waits if run_ended(s.run) is None), None)
        first = first or (open_waits[0] if open_waits else None)
        if listening is not None or len(chunk) < WAITS_CHUNK:
            return listening or first
        after = chunk[-1].pk


def _renamed(step: Step) -> bool:
    """Whether a release renamed `step`'s wait under its run; if so, the run is held (unless
    a person has it already)."""
    run = step.run
    if renamed_wait(step, definition.registry.get(run.workflow_name,
                                                  run.workflow_version)) is None:
        return False
    if run.status == RunStatus.WAITING:  # otherwise a person has it already
        try:
            hold_renamed_wait(run.pk, step_name=step.name,
                              actor=Actor.system("event wait renamed by a release"))
        except TransitionNotAllowed:
            pass  # it stopped waiting meanwhile
    return True


def hold_wait_renamed_to(workflow: str, event: str, key: str) -> None:
    """An event under a name nothing waits for was kept: hold the run it is for if that
    run's step waits under another name while its code now has it wait for `event`. The run
    is found by its business key, along run_unique_business_key, where the step correlates
    by it; a wait with its own correlate() is found when an event under its old name comes,
    or when it is claimed (its timeout, a resume)."""
    step = _step_by_key(workflow, event, key, status=StepStatus.WAITING)
    if step is not None:
        _renamed(step)


def _step_by_key(workflow: str, event: str, key: str, **status) -> Step | None:
    """The event step, for `event` in the code, of the run whose business key is `key`, where
    that step correlates by the business key (along run_unique_business_key)."""
    names = [s.name for s in event_steps(workflow, event) if s.correlate is None]
    if not names:
        return None
    return (Step.objects.filter(run__workflow_name=workflow, run__business_key=key,
                                name__in=names, kind=definition.EVENT, **status)
            .select_related("run").first())


def refuse_for_ended(kept: ExternalEvent, step: Step) -> bool:
    """If a person ended the run of `step` (the wait `kept` is for), mark `kept` refused for
    that run and say so, once, on its log and at WARNING: a run that is reopened does not
    consume an event that came while it was ended; a person decides. Returns whether this
    call marked it."""
    marked = refuse_for_ended_run(step.run_id, kept=kept, step_name=step.name,
                                  actor=Actor.system(f"event {kept.source}"))
    if marked:
        # This row as it now stands, for the door's answer (no keep time: it is a person's).
        kept.refresh_from_db(fields=["refused_at", "refused_run_id", "refused_reason"])
        logger.warning("kept event %s (%s:%s, %s) came for run %s, which a person ended; it "
                       "is left for a person, not delivered if the run is reopened", kept.pk,
                       kept.source, kept.event_id, kept.event_name, step.run_id)
    return marked


def names_its_run(step: Step) -> bool:
    """Whether the key `step` waits under is its run's business key, which no other run of
    the workflow has (run_unique_business_key): an event for it is that run's alone."""
    return step.remote_ref == awaiting_ref(awaited_event(step), step.run.business_key)


def not_for_ended(kept: ExternalEvent, step: Step) -> None:
    """`kept` came for a wait that only `step`'s run, which a person ended, holds (or that
    run stopped waiting meanwhile: then nothing is marked). Where the key names that run
    (names_its_run), the event is refused for it, left for a person (refuse_for_ended).
    Otherwise the key is one a correlate() gives, maybe to other runs that have not reached
    the wait yet: the event stays kept for the next run that waits under it, as an early
    event, passed over by the ended one (pass_over)."""
    if names_its_run(step):
        refuse_for_ended(kept, step)
    else:
        pass_over(kept, step)


def pass_over(kept: ExternalEvent, step: Step) -> bool:
    """Mark kept `kept` as not for `step`'s run, if a person ended it: refused_run_id names
    the run, refused_at stays empty, so the event stays kept for any other run that waits
    under its key (within its keep time) and this one does not take it on its own if
    reopened. Said once, at WARNING. Returns whether this call marked it (False: the run has
    not ended, or another run was passed over, or the row was settled meanwhile)."""
    run = Run.objects.filter(pk=step.run_id).first()
    if run is None or (why := run_ended(run)) is None:
        return False  # it stopped waiting meanwhile, not ended: nothing is the run's to pass
    marked = ExternalEvent.objects.filter(EVENT_STATES["kept"], pk=kept.pk,
                                          refused_run_id__isnull=True).update(
        refused_run_id=run.pk)
    if marked:
        kept.refused_run_id = run.pk
        logger.warning("kept event %s (%s:%s, %s) came for the key %r, under which only run %s "
                       "waits (%s): it stays kept for the next run that waits under the key, "
                       "not for that one, even if it is reopened", kept.pk, kept.source,
                       kept.event_id, kept.event_name, kept.correlation_key, run.pk, why)
    return bool(marked)


def refuse_for_ended_by_key(kept: ExternalEvent) -> bool:
    """The door, after keeping an event that no waiting run took: if the run of its business
    key was ended by a person (before it reached the wait, most often), the event is refused
    for it (refuse_for_ended) rather than left for that run to consume once reopened. A wait
    with its own correlate() names its run only while it waits: an event for one that was
    ended before reaching it stays kept, as an early event does."""
    if kept.refused_run_id is not None:
        return False  # the waiting run's look refused it already, or passed it over
    step = _step_by_key(kept.workflow_name, kept.event_name, kept.correlation_key)
    return step is not None and run_ended(step.run) is not None \
        and refuse_for_ended(kept, step)


def consume_kept(kept: ExternalEvent, *, now: datetime | None = None) -> int | None:
    """Deliver a kept event to the run now waiting for it, if any. Returns the run's id. One
    past its keep time is marked expired instead (and None returned): whoever meets it first
    says so; no run takes it."""
    if past_its_time(kept, transition_time(now)):
        expire_kept(kept, now=now)
        return None
    step = waiting_step(kept.workflow_name, kept.awaited_ref, now=now,
                        passing_over=kept.refused_run_id)
    if step is None:
        return None
    if run_ended(step.run) is not None:
        not_for_ended(kept, step)
        return None
    payload = kept.payload
    if not one_schema(kept.workflow_name, kept.event_name):
        try:
            payload = for_run(step, kept.event_name, payload)
        except EventRefused as exc:
            refuse_kept(kept, step, exc)
            return None
    try:
        deliver_event(step.run_id, step_name=step.name, source=kept.source,
                      event_id=kept.event_id, payload=payload,
                      actor=Actor.system(f"event {kept.source}"), kept=kept, now=now)
    except DuplicateEvent:
        return None
    except TransitionNotAllowed:
        # The run stopped waiting, or a person ended it meanwhile, whose step still holds
        # the wait: then it is not that run's, before a reopen could hand it over.
        not_for_ended(kept, step)
        return None
    return step.run_id


def refuse_kept(kept: ExternalEvent, step: Step, refused: EventRefused) -> bool:
    """A kept event that the run waiting for it under `step` cannot take (its version's
    schema refuses the payload; `refused` names the fields), said the one way, whichever
    path meets it first: the run beginning to wait, the sweeper's pass, or the insert that
    crossed the wait. It is marked refused with the reason, so that no path tries it again
    (each would be refused the same: a run's version does not change), recorded on the run
    in that transaction (transitions.refused_events.refuse_kept_event: the event, the step, the
    failing fields), and logged once, at WARNING: the sender was told it was kept, and the
    run waits on for a person (who may deliver the event by hand, shaped for that version,
    or skip it). Returns whether this call marked it (False: another path did first, or it
    was consumed meanwhile)."""
    fields = [".".join(map(str, e["loc"])) for e in refused.errors]
    marked = refuse_kept_event(step.run_id, kept=kept, step_name=step.name,
                               reason=str(refused), fields=fields,
                               actor=Actor.system(f"event {kept.source}"))
    if marked:
        logger.warning("kept event %s (%s:%s, %s) refused by run %s, which waits for it; "
                       "it will not be tried again: %s", kept.pk, kept.source, kept.event_id,
                       kept.event_name, step.run_id, refused)
    return marked


def consume_kept_for_run(run_id: int) -> bool:
    """After a run began to wait for an event: deliver the event kept for it, if one came
    early. Called after the worker let go of the run (runs.tasks), and by the door before it
    delivers a new event. Kept events past their time that it meets first are marked
    expired, and those the run refuses are marked refused (refuse_kept), and the next one is
    taken; the run waits on if none is left."""
    step = (Step.objects.filter(run_id=run_id, kind=definition.EVENT, status=StepStatus.WAITING)
            .exclude(remote_ref="").first())
    if step is None:
        return False
    # Along external_event_kept_ref_idx: the kept row names the wait as the step does. Not
    # those that came while this run was ended (pass_over): another run's to take.
    kept = ExternalEvent.objects.filter(
        EVENT_STATES["kept"], awaited_ref=step.remote_ref,
        workflow_name=Run.objects.filter(pk=run_id).values("workflow_name")[:1],
    ).exclude(refused_run_id=run_id).order_by("received_at", "pk")
    while (found := kept.first()) is not None:
        if past_its_time(found, transition_time(None)):
            if not expire_kept(found):
                return False  # consumed (or expired) by another path meanwhile
            continue
        if consume_kept(found) is not None:
            return True
        if not ExternalEvent.objects.filter(pk=found.pk, refused_run_id=run_id,
                                            refused_at__isnull=False).exists():
            return False  # the run does not take it now (it stopped waiting, timed out, ...)
        # Refused by this run (its version's schema): the next one kept for the wait may be
        # its, and must be taken before an event that comes after it (the door asks here).
    return False


# Kept events delivered per query of the sweeper's pass, and kept rows one pass looks at.
KEPT_BATCH = 100
KEPT_PASS_ROWS = 5000


def consumable_kept(*, after: int = 0, upto: int | None = None,
                    limit: int = KEPT_BATCH) -> list[ExternalEvent]:
    """The next kept events (by id, past `after`, up to `upto`), not refused, that a step
    now waits for: those whose awaited_ref a waiting event step holds. Reads the kept rows
    along external_event_kept_order_idx, each looked up along step_remote_ref_idx. (The ref
    does not name the workflow: consume_kept checks it, and the runs table stays out of the
    sweeper's query.)"""
    waits = Step.objects.filter(remote_ref=OuterRef("awaited_ref"), kind=definition.EVENT,
                                status=StepStatus.WAITING)
    # Named, the partial index's condition is seen to hold for the ref looked up.
    waits = waits.exclude(remote_ref="")
    kept = ExternalEvent.objects.filter(EVENT_STATES["kept"], pk__gt=after)
    if upto is not None:
        kept = kept.filter(pk__lte=upto)
    return list(kept.filter(Exists(waits)).order_by("pk")[:limit])


def fill_awaited_refs(rows, *, batch: int) -> int | None:
    """Write awaited_ref, by awaiting_ref, into the first `batch` (by id) of the kept `rows`
    that lack it (the sweeper's, for rows an older release kept; migration 0043 has its own
    copy, as migrations depend on no application code). Only kept rows: nothing looks a
    consumed event up by its reference.
    Returns the last id filled, or None if none lacked it."""
    found = list(rows.filter(awaited_ref="", consumed_at__isnull=True).order_by("pk")
                 .only("pk", "event_name", "correlation_key")[:batch])
    for event in found:
        event.awaited_ref = awaiting_ref(event.event_name, event.correlation_key)
    rows.bulk_update(found, ["awaited_ref"])
    return found[-1].pk if found else None


KEPT_PASS_JOB = "runs.sweep:kept-events"


def consume_kept_events(*, now: datetime | None = None, batch: int = KEPT_BATCH,
                        rows: int = KEPT_PASS_ROWS) -> int:
    """The sweeper's pass: kept events whose run now waits for them are delivered (the
    backstop for an event and a wait that crossed, or a worker lost between its wait and
    consume_kept_for_run), however long ago they came within their keep time (the sweeper
    expires those past it first: kept_expiry.expire_kept_events).

    Kept rows are never deleted (expired ones leave the pass), and a sender that misbehaves
    can keep millions within their keep time that no run will wait for: one pass looks at
    `rows` of them, by id, from where the last pass stopped (PassPosition: shared by every
    worker, kept over restarts), and starts again from the first once it reaches the end.
    So a pass costs the same however many are kept, and every kept event is looked at
    within (kept rows / `rows`) passes; the fast paths (an event finds its waiting run at
    once, a run that begins to wait looks for its kept event) do not wait for it. The
    sweeper runs one pass at a time (single_pass)."""
    # Events kept by the previous release while this one's migration ran have no reference
    # yet, and nothing finds them without it; along external_event_no_ref_idx, empty once
    # they are filled.
    fill_awaited_refs(ExternalEvent.objects.filter(consumed_at__isnull=True), batch=batch)
    position = PassPosition.objects.filter(job=KEPT_PASS_JOB).values_list("after_id",
                                                                            flat=True)
    after = position.first() or 0
    upto = _window_end(after, rows)
    delivered = _deliver_kept(after, upto, batch, now)
    if upto is None and after:
        # Past the end of the kept rows: on from the first, up to where this pass began.
        upto = _window_end(0, rows)
        upto = after if upto is None else min(upto, after)
        delivered += _deliver_kept(0, upto, batch, now)
    PassPosition.objects.bulk_create(  # one upsert
        [PassPosition(job=KEPT_PASS_JOB, after_id=upto or 0, updated_at=timezone.now())],
        update_conflicts=True, unique_fields=["job"], update_fields=["after_id", "updated_at"])
    return delivered


def _window_end(after: int, rows: int) -> int | None:
    """The id of the `rows`th kept row past `after`; None if fewer are kept past it."""
    bound = list(ExternalEvent.objects.filter(UNSETTLED, pk__gt=after)
                 .order_by("pk").values_list("pk", flat=True)[rows - 1:rows])
    return bound[0] if bound else None


def _deliver_kept(after: int, upto: int | None, batch: int, now: datetime | None) -> int:
    delivered = 0
    while True:
        found = consumable_kept(after=after, upto=upto, limit=batch)
        for kept in found:
            run_id = consume_kept(kept, now=now)
            if run_id:
                delivered += 1
                send_wakeup(run_id)
        if len(found) < batch:
            return delivered
        after = found[-1].pk
