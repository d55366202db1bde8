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
whose code no longer waits for it. Either way the run is held for a person
(runs.waiting.kept: hold_renamed_wait), nothing delivered on a guess, rather than left to
its timeout.

An event for a run a person ended (terminated) is kept too, the sender told so as for any
kept event, but the run takes no event on its own, and reopening it does not hand it over
(runs.waiting.kept: not_for_ended). Where its key is that run's business key, the event is
refused for the run and said on its log, left for a person, who may deliver it by hand once
the run is reopened. A key that a wait's own correlate() gave names no run: the event is
kept for the next run that waits under it, as an early event is, with its keep time.

A kept event is kept for RUNS_EVENT_KEEP_SECONDS from when it came (keep_until, which the
sender's answer carries), then expires and is never delivered (runs.waiting.kept_expiry).

What a payload must be is runs.waiting.payloads' (and how a refusal is worded, for a sender
or for a person delivering by hand: payloads.refusal); what becomes of a kept event,
runs.waiting.kept's.
"""

import hashlib
import hmac
import json
import math
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from audit.chain import Actor
from audit.head_seals import same_mac
from audit.redaction import redact

from ..machine import artifacts
from ..machine.errors import TransitionNotAllowed
from ..machine.storable import (
    NotFinite,
    finite_json,
    identifier_problem,
    text_problem,
    value_problem,
)
from ..machine.transitions import DuplicateEvent, awaiting_ref, deliver_event
from ..machine.transitions.events import insert_event
from ..machine.transitions.kernel import input_hash, transition_time
from ..machine.transitions.refused_events import run_ended
from ..machine.transitions.wait_functions import KEY_LENGTH
from ..models import ExternalEvent
from .kept import (
    consume_kept,
    consume_kept_for_run,
    hold_wait_renamed_to,
    refuse_for_ended_by_key,
    waiting_step,
)
from .kept_expiry import keep_time
from .payloads import EventIdReused, EventRefused, for_run, one_schema, validated

# How old a signed webhook's timestamp may be (either way): older is a replay.
SIGNATURE_WINDOW_SECONDS = 300

# How deep a payload's objects and lists may nest. Deeper is refused before anything walks
# it: redaction and the storable checks recurse, and no event needs more.
MAX_PAYLOAD_DEPTH = 64

# What the columns of runs.world_models.ExternalEvent hold.
FIELD_LENGTHS = {"workflow": 200, "event": 200, "correlation_key": KEY_LENGTH,
                 "event_id": 200, "source": 100}


@dataclass(frozen=True)
class Receipt:
    status: str  # "delivered", "kept" or "duplicate"
    run_id: int | None = None
    # Until when the event is kept (kept, or a duplicate of an event not delivered): what the
    # sender is told beside the status, not part of what the answer is.
    keep_until: datetime | None = field(default=None, compare=False)


def _refuse_unstorable_payload(payload: dict) -> None:
    problem = value_problem(payload)
    if problem is not None:
        raise EventRefused(f"the payload cannot be stored: {problem}",
                           [{"loc": ["payload"], "msg": problem}], nothing_kept=True)


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
        raise _too_deep()


def refuse_too_large(payload) -> None:
    """EventRefused if the payload, as compact JSON, is larger than a run's input may be
    (RUNS_INPUT_MAX_BYTES): it is input from outside as a start's is, and becomes the
    waiting step's result as it is, kept in the step's row (not an artifact) and read with it
    at every claim of the run and on its page."""
    if (size := artifacts.over_input_limit(payload)) is not None:
        msg = (f"{size:,} bytes as JSON, over the limit of {artifacts.input_limit():,} bytes "
               "(RUNS_INPUT_MAX_BYTES)")
        raise EventRefused(f"the payload is {msg}", [{"loc": ["payload"], "msg": msg}],
                           nothing_kept=True)


def _too_deep() -> EventRefused:
    msg = f"nested deeper than {MAX_PAYLOAD_DEPTH} levels of objects and lists"
    return EventRefused(f"the payload is {msg}", [{"loc": ["payload"], "msg": msg}],
                        nothing_kept=True)


def payload_from_json(text: str):
    """The payload a person gives as JSON text (an event delivered by hand), held to the
    rules of one sent to the door: EventRefused if it is not JSON, nests deeper than
    MAX_PAYLOAD_DEPTH, or holds text the database cannot store. Whether it is what the
    waiting step accepts is payloads.validated's."""
    try:
        payload = finite_json(text)
    except RecursionError:
        # Nested deeper than Python's stack, so far deeper than the limit.
        raise _too_deep() from None
    except NotFinite as exc:
        raise EventRefused(f"the payload holds {exc.texts[0]}, not a finite number",
                           [{"loc": ["payload"], "msg": "not a finite number"}],
                           nothing_kept=True) from None
    except ValueError:
        raise EventRefused("the payload is not JSON", [{"loc": ["payload"], "msg": "not JSON"}],
                           nothing_kept=True) from None
    refuse_too_deep(payload)
    refuse_too_large(payload)
    _refuse_unstorable_payload(payload)
    return payload


def _refuse_too_long(**texts: str) -> None:
    errors = [{"loc": [name], "msg": f"longer than {FIELD_LENGTHS[name]} characters"}
              for name, text in texts.items() if len(text) > FIELD_LENGTHS[name]]
    if errors:
        raise EventRefused("; ".join(f"{e['loc'][0]}: {e['msg']}" for e in errors), errors,
                           nothing_kept=True)


def _refuse_unnamed(**texts: str) -> None:
    """EventRefused naming each of `texts` (the event's id, its correlation key) blank or
    holding control characters (identifier_problem). A wait whose own correlate() gives such
    a key is refused by the same rule (transitions.wait_functions.key_problem): its start,
    or the step when the run reaches it, never left waiting for an event the door refuses."""
    errors = [{"loc": [name], "msg": problem} for name, text in texts.items()
              if (problem := identifier_problem(text)) is not None]
    if errors:
        raise EventRefused("; ".join(f"{e['loc'][0]}: {e['msg']}" for e in errors), errors,
                           nothing_kept=True)


def _refuse_unstorable(**texts: str) -> None:
    """EventRefused naming each of `texts` the database cannot store (runs.machine.storable):
    they are looked up and written as they are, and a NUL would fail in the database."""
    errors = [{"loc": [name], "msg": problem} for name, text in texts.items()
              if (problem := text_problem(text)) is not None]
    if errors:
        raise EventRefused("; ".join(f"{e['loc'][0]}: {e['msg']}" for e in errors), errors,
                           nothing_kept=True)


def receive_event(*, workflow: str, event: str, key: str, event_id: str, source: str,
                  payload, actor: Actor, now: datetime | None = None) -> Receipt:
    """Deliver the event to the run waiting for it, or keep it. Raises EventRefused."""
    if not event_id or not source or not key:
        raise EventRefused("an event needs an id, a source and a correlation key")
    texts = {"workflow": workflow, "event": event, "correlation_key": key,
             "event_id": event_id, "source": source}
    _refuse_unstorable(**texts)
    _refuse_too_long(**texts)
    _refuse_unnamed(event_id=event_id, correlation_key=key)
    refuse_too_deep(payload)
    refuse_too_large(payload)
    ref = awaiting_ref(event, key)
    try:
        sent, payload = payload, validated(workflow, event, payload)
    except EventRefused:
        # Refused (no step declares the event any more, or not with this payload), it may
        # still be what a run waits for: that run is held.
        waiting_step(workflow, ref, now=now)
        raise
    _refuse_unstorable_payload(payload)
    digests = payload_digests(sent)

    def received_before() -> Receipt | None:
        return _received_before(workflow, source, event_id, sent, event=event, key=key)

    if (previous := received_before()) is not None:
        return previous
    step = waiting_step(workflow, ref, now=now)
    if step is not None and run_ended(step.run) is not None:
        step = None  # not the run's on its own: kept, then whose it is (consume_kept)
    if step is not None and consume_kept_for_run(step.run_id):
        # An event kept for this wait came first (the run began to wait before it was handed
        # over): the run takes that one, and this one is kept after it.
        step = None
    if step is not None:
        delivered = for_run(step, event, sent)
        _refuse_unstorable_payload(delivered)
        try:
            deliver_event(step.run_id, step_name=step.name, source=source, event_id=event_id,
                          payload=delivered, actor=actor, digests=digests, now=now)
        except DuplicateEvent:
            return received_before() or Receipt("duplicate")
        except TransitionNotAllowed:
            # The run stopped waiting meanwhile, or a person ended it: keep the event (whose
            # it is then, consume_kept below says: kept.not_for_ended).
            pass
        else:
            return Receipt("delivered", step.run_id)
    if not one_schema(workflow, event):
        # Kept as sent: the run it is for may be of a version whose schema reads it
        # otherwise than the one that let it in (consume_kept checks it against that one).
        payload = sent
        _refuse_unstorable_payload(payload)
    # By the database's clock: the order of the events kept for one wait is read from it,
    # their expiry judged by it, and the web processes' clocks may disagree.
    received_at = transition_time(now)
    try:
        with transaction.atomic():
            kept = insert_event(
                workflow_name=workflow, source=source, event_id=event_id, event_name=event,
                correlation_key=key, payload=redact(payload), received_at=received_at,
                keep_until=received_at + keep_time(), **digests)
    except IntegrityError:
        return received_before() or Receipt("duplicate")
    # A run may have begun to wait between the look above and this insert.
    run_id = consume_kept(kept, now=now)
    if run_id:
        return Receipt("delivered", run_id)
    if not refuse_for_ended_by_key(kept):
        hold_wait_renamed_to(workflow, event, key)
    # Refused for the run a person ended, it is left for a person: no run's keep time to say.
    # Passed over by one (its key a correlate()'s), it is kept for the next run as any event.
    return Receipt("kept", keep_until=None if kept.refused_at else kept.keep_until)


def payload_digest(payload) -> str:
    """What ExternalEvent.payload_digest holds: the sha256 of the payload as sent, redacted
    as it is stored (a digest is no place for a secret, even hashed)."""
    return input_hash(redact(payload))


def payload_mac(payload, *, key_id: str | None = None) -> str:
    """What ExternalEvent.payload_mac holds: "key id:hex HMAC-SHA256" of the whole payload as
    sent, its redacted fields in clear, with a key of RUNS_EVENT_DIGEST_KEYS (the first, or
    `key_id`). Keyed, because a plain hash of a low-entropy secret (a PIN, an IBAN) is undone
    by trying every value; the key is not in the database."""
    keys = settings.RUNS_EVENT_DIGEST_KEYS
    key_id = next(iter(keys)) if key_id is None else key_id
    # ASCII escapes, as input_hash's: a lone surrogate the door refuses later still encodes.
    message = b"event-payload:" + json.dumps(payload, sort_keys=True,
                                             separators=(",", ":")).encode()
    return f"{key_id}:{hmac.digest(keys[key_id].encode(), message, hashlib.sha256).hex()}"


def payload_digests(payload) -> dict[str, str]:
    """The payload's digest columns of ExternalEvent, as an event's row is written with them."""
    return {"payload_digest": payload_digest(payload), "payload_mac": payload_mac(payload)}


def _another_payload(previous: ExternalEvent, sent) -> str | None:
    """How the payload of `previous` is told from `sent`, in words for the sender, or None if
    it cannot be. The redacted digest first (it names both); then the keyed one, which sees
    the redacted fields too. A row written before payload_mac, or under a key no longer in
    the ring, is compared by its redacted digest alone, as it was when it came."""
    digest = payload_digest(sent)
    if previous.payload_digest and previous.payload_digest != digest:
        return f"sha256 {previous.payload_digest[:16]}..., this one {digest[:16]}..."
    key_id, _, mac = previous.payload_mac.partition(":")
    if key_id not in settings.RUNS_EVENT_DIGEST_KEYS:
        return None
    if same_mac(payload_mac(sent, key_id=key_id).partition(":")[2], mac):
        return None
    # Neither MAC is quoted: nothing the sender did not send itself is told.
    return "they differ in a field kept redacted"


def _received_before(workflow: str, source: str, event_id: str, sent, *, event: str,
                     key: str) -> Receipt | None:
    """The answer to an event whose source and id were received before: the same, naming the
    run that took it, whether the first delivery committed long ago or while this one ran;
    or, not delivered, until when it is (or was, if it expired) kept. EventIdReused if that
    one came as another event, for another correlation key or with another payload than
    `sent` (in a redacted field too): the sender would otherwise read "duplicate" and
    believe what it meant delivered, as a sender correcting a mistyped key would."""
    previous = ExternalEvent.objects.filter(workflow_name=workflow, source=source,
                                            event_id=event_id).first()
    if previous is None:
        return None
    for what, before, now in (("event", previous.event_name, event),
                              ("correlation key", previous.correlation_key, key)):
        if before != now:
            raise EventIdReused(
                f"event {event_id!r} from {source!r} was received before with another "
                f"{what} ({before!r}, this one {now!r}): an id names one event, and the one "
                "received stands; nothing was changed. Send another event under a new id")
    if (difference := _another_payload(previous, sent)) is not None:
        raise EventIdReused(
            f"event {event_id!r} from {source!r} was received before with another payload "
            f"({difference}): an id names one event, and the one received stands; nothing "
            "was changed. Send another event under a new id")
    kept = previous.consumed_at is None and previous.refused_at is None
    return Receipt("duplicate", previous.consumed_run_id,
                   keep_until=previous.keep_until if kept else None)


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
    # As bytes: compare_digest raises TypeError on a str with non-ASCII characters, and a
    # header anyone can send must fail like any other wrong signature.
    sent = (sent_signature or "").encode("utf-8", "replace")
    # The secret, and during a rotation the one it replaces: both are always compared, so
    # the time taken tells nothing of which (or whether either) matched.
    secrets = [config["secret"], config.get("previous_secret") or config["secret"]]
    matches = [hmac.compare_digest(signature(secret, timestamp, body).encode(), sent)
               for secret in secrets]
    if not any(matches):
        raise EventRefused("X-Event-Signature does not match")
    return config

