"""Receiving external events: validate one against the step that waits for it, deliver it
to the run waiting for it, or keep it for the run that will (an event may arrive before its
run reaches the wait). The API (POST /api/events), signed webhooks and the sweeper call
these; runs.machine.transitions.events writes the state.

An event names its workflow, its name, its correlation key (by default the business key
of the run it is meant for), its source and its id. The same source and id delivered twice
changes nothing the second time: the row is written in the transaction of the transition
that consumes it, under a unique constraint.

A release may rename the event a running run waits for (or the step that waits) without a
new version. The run's row still waits under the old name: an event under the new name
finds no run and is kept, one under the old name is refused at the door or found by a row
whose code no longer waits for it. Either way the run is held for a person here
(hold_renamed_wait), nothing delivered on a guess, rather than left to its timeout.
"""

import hashlib
import hmac
import logging
import math
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Case, Exists, OuterRef, Value, When
from django.db.models.functions import Concat, Length
from django.utils import timezone
from pydantic import ValidationError

from audit.chain import Actor

from .. import store
from ..definitions import definition
from ..machine.errors import TransitionNotAllowed
from ..machine.redaction import redact
from ..machine.storable import text_problem, value_problem
from ..machine.transitions import (
    AWAITING,
    KEY_DIGEST,
    REF_LENGTH,
    DuplicateEvent,
    awaited,
    awaiting_ref,
    deliver_event,
    hold_renamed_wait,
    renamed_wait,
    shortest_digested_key,
)
from ..machine.wakeup import send_wakeup
from ..models import ExternalEvent, PassPosition, Run, RunStatus, Step, StepStatus

logger = logging.getLogger(__name__)

# How old a signed webhook's timestamp may be (either way): older is a replay.
SIGNATURE_WINDOW_SECONDS = 300

# How deep a payload's objects and lists may nest. Deeper is refused before anything walks
# it: redaction and the storable checks recurse, and no event needs more.
MAX_PAYLOAD_DEPTH = 64

# What the columns of runs.world_models.ExternalEvent hold.
FIELD_LENGTHS = {"workflow": 200, "event": 200, "correlation_key": 300, "event_id": 200,
                 "source": 100}


class EventRefused(ValueError):
    """The event cannot be accepted as sent (unknown workflow or event, invalid payload);
    nothing was written. `errors` lists the payload's faults field by field."""

    def __init__(self, message: str, errors: list[dict] | None = None):
        super().__init__(message)
        self.errors = errors or []


@dataclass(frozen=True)
class Receipt:
    status: str  # "delivered", "kept" or "duplicate"
    run_id: int | None = None


def event_steps(workflow: str, event: str) -> list[definition.StepDef]:
    return [s for wf in definition.registry.versions(workflow) for s in wf.steps
            if s.kind == definition.EVENT and s.event_name == event]


def validated(workflow: str, event: str, payload) -> dict:
    """The payload as a step waiting for `event` accepts it, or EventRefused naming why.
    Before its run is known, an event may be meant for a run of any registered version: the
    payload passes if the step of one of them accepts it (the newest first, and its faults
    are the ones named). The run's own version checks it again on delivery (for_run)."""
    if definition.registry.latest(workflow) is None:
        raise EventRefused(f"unknown workflow {workflow!r}")
    steps = event_steps(workflow, event)
    if not steps:
        raise EventRefused(f"no step of {workflow} waits for an event {event!r}")
    if not isinstance(payload, dict):
        raise EventRefused("the payload must be a JSON object",
                           [{"loc": ["payload"], "msg": "not an object"}])
    refused = None
    for step in reversed(steps):
        try:
            return _accepted(step.schema, event, payload)
        except EventRefused as exc:
            refused = refused or exc
    raise refused


def _accepted(schema, event: str, payload: dict) -> dict:
    if schema is None:
        return payload
    try:
        return schema.model_validate(payload).model_dump(mode="json")
    except ValidationError as exc:
        errors = [{"loc": ["payload", *e["loc"]], "msg": e["msg"]} for e in exc.errors()]
        fields = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in errors)
        raise EventRefused(f"payload of {event} does not match {schema.__name__}: {fields}",
                           errors) from None


def one_schema(workflow: str, event: str) -> bool:
    """Whether every registered version checks `event` with the same schema (then the
    check at the door is the check of every run)."""
    return len({id(s.schema) for s in event_steps(workflow, event)}) <= 1


def for_run(step: Step, event: str, payload: dict) -> dict:
    """The payload as the waiting `step` accepts it in its run's own version (whose schema
    may differ from the newest's), or EventRefused naming why."""
    run = step.run
    workflow = definition.registry.get(run.workflow_name, run.workflow_version)
    spec = next((s for s in workflow.steps if s.name == step.name and s.kind == definition.EVENT
                 and s.event_name == event), None) if workflow else None
    if spec is None:  # the run's version is no longer registered: the door's check stands
        return payload
    try:
        return _accepted(spec.schema, event, payload)
    except EventRefused as exc:
        raise EventRefused(f"run {run.pk} (version {run.workflow_version}) waits for it: {exc}",
                           exc.errors) from None


def _refuse_unstorable_payload(payload: dict) -> None:
    problem = value_problem(payload)
    if problem is not None:
        raise EventRefused(f"the payload cannot be stored: {problem}; nothing was kept",
                           [{"loc": ["payload"], "msg": problem}])


def fitting_source(source: str) -> str:
    """`source` as ExternalEvent.source can hold it: as it is if it fits, otherwise cut and
    ended with its own sha256 (so two long sources sharing a beginning stay two sources,
    and the same source is always written the same way)."""
    limit = FIELD_LENGTHS["source"]
    if len(source) <= limit:
        return source
    digest = hashlib.sha256(source.encode()).hexdigest()[:32]
    return f"{source[:limit - len(digest) - 1]}~{digest}"


def too_deep(value, limit: int = MAX_PAYLOAD_DEPTH) -> bool:
    """Whether objects and lists nest in `value` more than `limit` levels ({} is one level).
    Walked without recursion, so any depth gets an answer."""
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict):
            inner = item.values()
        elif isinstance(item, list | tuple):
            inner = item
        else:
            continue
        if depth > limit:
            return True
        pending.extend((v, depth + 1) for v in inner)
    return False


def refuse_too_deep(payload) -> None:
    """EventRefused if the payload nests deeper than MAX_PAYLOAD_DEPTH."""
    if too_deep(payload):
        msg = f"nested deeper than {MAX_PAYLOAD_DEPTH} levels of objects and lists"
        raise EventRefused(f"the payload is {msg}; nothing was kept",
                           [{"loc": ["payload"], "msg": msg}])


def _refuse_too_long(**texts: str) -> None:
    errors = [{"loc": [name], "msg": f"longer than {FIELD_LENGTHS[name]} characters"}
              for name, text in texts.items() if len(text) > FIELD_LENGTHS[name]]
    if errors:
        raise EventRefused("; ".join(f"{e['loc'][0]}: {e['msg']}" for e in errors)
                           + "; nothing was kept", errors)


def _refuse_unstorable(**texts: str) -> None:
    """EventRefused naming each of `texts` the database cannot store (runs.machine.storable):
    they are looked up and written as they are, and a NUL would fail in the database."""
    errors = [{"loc": [name], "msg": problem} for name, text in texts.items()
              if (problem := text_problem(text)) is not None]
    if errors:
        raise EventRefused("; ".join(f"{e['loc'][0]}: {e['msg']}" for e in errors)
                           + "; nothing was kept", errors)


def _waiting_step(workflow: str, event: str, key: str) -> Step | None:
    """The step that waits for `event` with `key`, if its run's code still has it wait there;
    a run whose code no longer does is held for a person (and None returned)."""
    # Along step_remote_ref_idx: the step names what it waits for.
    step = (Step.objects.filter(remote_ref=awaiting_ref(event, key), kind=definition.EVENT,
                                status=StepStatus.WAITING, run__workflow_name=workflow)
            .select_related("run").first())
    if step is None or not _renamed(step):
        return step
    return None


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


def _hold_wait_renamed_to(workflow: str, event: str, key: str) -> None:
    """An event under a name nothing waits for was kept: hold the run it is for if that
    run's step waits under another name while its code now has it wait for `event`. The run
    is found by its business key, along run_unique_business_key, where the step correlates
    by it; a wait with its own correlate() is found when an event under its old name comes,
    or when it is claimed (its timeout, a resume)."""
    names = [s.name for s in event_steps(workflow, event) if s.correlate is None]
    if not names:
        return
    step = (Step.objects.filter(run__workflow_name=workflow, run__business_key=key,
                                name__in=names, kind=definition.EVENT,
                                status=StepStatus.WAITING)
            .select_related("run").first())
    if step is not None:
        _renamed(step)


def receive_event(*, workflow: str, event: str, key: str, event_id: str, source: str,
                  payload, actor: Actor, now: datetime | None = None) -> Receipt:
    """Deliver the event to the run waiting for it, or keep it. Raises EventRefused."""
    if not event_id or not source or not key:
        raise EventRefused("an event needs an id, a source and a correlation key")
    texts = {"workflow": workflow, "event": event, "correlation_key": key,
             "event_id": event_id, "source": source}
    _refuse_unstorable(**texts)
    _refuse_too_long(**texts)
    refuse_too_deep(payload)
    try:
        sent, payload = payload, validated(workflow, event, payload)
    except EventRefused:
        # Refused (no step declares the event any more, or not with this payload), it may
        # still be what a run waits for: that run is held.
        _waiting_step(workflow, event, key)
        raise
    _refuse_unstorable_payload(payload)
    previous = ExternalEvent.objects.filter(workflow_name=workflow, source=source,
                                            event_id=event_id).first()
    if previous is not None:
        return Receipt("duplicate", previous.consumed_run_id)
    step = _waiting_step(workflow, event, key)
    if step is not None:
        delivered = for_run(step, event, sent)
        _refuse_unstorable_payload(delivered)
        try:
            deliver_event(step.run_id, step_name=step.name, source=source, event_id=event_id,
                          payload=delivered, actor=actor, now=now)
        except DuplicateEvent:
            return Receipt("duplicate")
        except TransitionNotAllowed:
            pass  # the run stopped waiting meanwhile: keep the event
        else:
            return Receipt("delivered", step.run_id)
    if not one_schema(workflow, event):
        # Kept as sent: the run it is for may be of a version whose schema reads it
        # otherwise than the one that let it in (consume_kept checks it against that one).
        payload = sent
        _refuse_unstorable_payload(payload)
    try:
        with transaction.atomic():
            kept = ExternalEvent.objects.create(
                workflow_name=workflow, source=source, event_id=event_id, event_name=event,
                correlation_key=key, payload=redact(payload), received_at=now or timezone.now())
    except IntegrityError:
        return Receipt("duplicate")
    # A run may have begun to wait between the look above and this insert.
    run_id = consume_kept(kept, now=now)
    if run_id:
        return Receipt("delivered", run_id)
    _hold_wait_renamed_to(workflow, event, key)
    return Receipt("kept")


def consume_kept(kept: ExternalEvent, *, now: datetime | None = None,
                 again: bool = False) -> int | None:
    """Deliver a kept event to the run now waiting for it, if any. Returns the run's id.
    `again`: the sweeper's pass, which meets an event the run's version refuses at each of
    its cycles; that was said when it came, or when the run began to wait."""
    step = _waiting_step(kept.workflow_name, kept.event_name, kept.correlation_key)
    if step is None:
        return None
    payload = kept.payload
    if not one_schema(kept.workflow_name, kept.event_name):
        try:
            payload = for_run(step, kept.event_name, payload)
        except EventRefused as exc:
            # Not for this run's version: it stays kept (and the run waits on).
            logger.log(logging.DEBUG if again else logging.WARNING,
                       "kept event %s not delivered to run %s: %s", kept.pk, step.run_id, exc)
            return None
    try:
        deliver_event(step.run_id, step_name=step.name, source=kept.source,
                      event_id=kept.event_id, payload=payload,
                      actor=Actor.system(f"event {kept.source}"), kept=kept, now=now)
    except (DuplicateEvent, TransitionNotAllowed):
        return None
    return step.run_id


def consume_kept_for_run(run_id: int) -> bool:
    """After a run began to wait for an event: deliver the event kept for it, if one came
    early. Called after the worker let go of the run (runs.tasks), and by the sweeper."""
    step = (Step.objects.filter(run_id=run_id, kind=definition.EVENT, status=StepStatus.WAITING)
            .exclude(remote_ref="").first())
    if step is None:
        return False
    event, key = awaited(step)
    kept = ExternalEvent.objects.filter(
        workflow_name=Run.objects.filter(pk=run_id).values("workflow_name")[:1],
        event_name=event, consumed_at__isnull=True).order_by("received_at", "pk")
    # The ref names the key, or (a long key) its digest: the kept events of that event with
    # a key as long are few, and each is matched by the ref it would wait under.
    found = kept.filter(correlation_key=key).first() or next(
        (e for e in kept.annotate(length=Length("correlation_key"))
         .filter(length__gte=shortest_digested_key(event))
         if awaiting_ref(event, e.correlation_key) == step.remote_ref), None)
    return found is not None and consume_kept(found) is not None


# Kept events delivered per query of the sweeper's pass, and kept rows one pass looks at.
KEPT_BATCH = 100
KEPT_PASS_ROWS = 5000


def consumable_kept(*, after: int = 0, upto: int | None = None,
                    limit: int = KEPT_BATCH) -> list[ExternalEvent]:
    """The next kept events (by id, past `after`, up to `upto`) that a step now waits for:
    those whose awaiting_ref a waiting event step holds. Reads the kept rows along
    external_event_kept_order_idx, each looked up along step_remote_ref_idx. (The ref does
    not name the workflow: consume_kept checks it, and the runs table stays out of the
    sweeper's query.)"""
    full = Concat(Value(AWAITING), "event_name", Value(":"), "correlation_key")
    ref = Case(When(ref_length__lte=REF_LENGTH, then=full),
               default=Concat(Value(AWAITING), "event_name", Value(f":{KEY_DIGEST}"),
                              store.current().sha256_hex("correlation_key")))
    waits = Step.objects.filter(remote_ref=OuterRef("awaited_ref"), kind=definition.EVENT,
                                status=StepStatus.WAITING)
    # Named, the partial index's condition is seen to hold for the ref looked up.
    waits = waits.exclude(remote_ref="")
    kept = ExternalEvent.objects.filter(consumed_at__isnull=True, pk__gt=after)
    if upto is not None:
        kept = kept.filter(pk__lte=upto)
    return list(kept.annotate(ref_length=Length(full)).annotate(awaited_ref=ref)
                .filter(Exists(waits)).order_by("pk")[:limit])


KEPT_PASS_JOB = "runs.sweep:kept-events"


def consume_kept_events(*, now: datetime | None = None, batch: int = KEPT_BATCH,
                        rows: int = KEPT_PASS_ROWS) -> int:
    """The sweeper's pass: kept events whose run now waits for them are delivered (the
    backstop for an event and a wait that crossed, or a worker lost between its wait and
    consume_kept_for_run), however long ago they came.

    Kept rows are never deleted, and a sender that misbehaves can keep millions that no run
    will wait for: one pass looks at `rows` of them, by id, from where the last pass stopped
    (PassPosition: shared by every worker, kept over restarts), and starts again from the
    first once it reaches the end. So a pass costs the same however many are kept, and
    every kept event is looked at within (kept rows / `rows`) passes; the fast paths (an
    event finds its waiting run at once, a run that begins to wait looks for its kept
    event) do not wait for it. The sweeper runs one pass at a time (single_pass)."""
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
    bound = list(ExternalEvent.objects.filter(consumed_at__isnull=True, pk__gt=after)
                 .order_by("pk").values_list("pk", flat=True)[rows - 1:rows])
    return bound[0] if bound else None


def _deliver_kept(after: int, upto: int | None, batch: int, now: datetime | None) -> int:
    delivered = 0
    while True:
        found = consumable_kept(after=after, upto=upto, limit=batch)
        for kept in found:
            run_id = consume_kept(kept, now=now, again=True)
            if run_id:
                delivered += 1
                send_wakeup(run_id)
        if len(found) < batch:
            return delivered
        after = found[-1].pk


# --- signed webhooks -----------------------------------------------------------------------

def signature(secret: str, timestamp: str, body: bytes) -> str:
    """HMAC-SHA256 over "<timestamp>.<body>", hex: what a source sends as X-Event-Signature."""
    return hmac.new(secret.encode(), timestamp.encode() + b"." + body,
                    hashlib.sha256).hexdigest()


def verify_webhook(source: str, *, timestamp: str, sent_signature: str, body: bytes,
                   now: datetime | None = None) -> dict:
    """The source's settings if the signature is right and the timestamp within the
    window; EventRefused (naming which check failed, never the secret) otherwise."""
    config = getattr(settings, "RUNS_EVENT_SOURCES", {}).get(source)
    if not config or not config.get("secret"):
        raise EventRefused(f"unknown event source {source!r}")
    try:
        sent_at = float(timestamp)
    except (TypeError, ValueError):
        sent_at = math.nan
    # float() also reads "nan" and "inf", which no window check refuses (every comparison
    # with NaN is false): a request stamped so would stay valid forever.
    if not math.isfinite(sent_at):
        raise EventRefused("X-Event-Timestamp must be seconds since the epoch")
    now_ts = (now or timezone.now()).timestamp()
    if abs(now_ts - sent_at) > SIGNATURE_WINDOW_SECONDS:
        raise EventRefused(f"X-Event-Timestamp is outside the {SIGNATURE_WINDOW_SECONDS} s "
                           "window: a replay, or a clock far off")
    expected = signature(config["secret"], timestamp, body)
    # As bytes: compare_digest raises TypeError on a str with non-ASCII characters, and a
    # header anyone can send must fail like any other wrong signature.
    sent = (sent_signature or "").encode("utf-8", "replace")
    if not hmac.compare_digest(expected.encode(), sent):
        raise EventRefused("X-Event-Signature does not match")
    return config

