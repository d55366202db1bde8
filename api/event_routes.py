"""External events in: POST /api/events for a token that may use the event's workflow, and
POST /api/events/webhook/{source} for a source that signs its deliveries (HMAC-SHA256 over
the timestamp and the body, with the source's secret, within a window against replay).

Thin: check who sends, then runs.waiting.events.receive_event delivers the event to the run that
waits for it, or keeps it for the run that will (or, where a person ended the run whose
business key it is, for a person to deliver). A redelivered event (same source and id)
answers 200 and changes nothing.

Who sends is checked before the body is read, for a signed event as for a token's: the
signature is over the raw bytes, so it needs nothing parsed, and a caller who cannot sign
learns nothing of the body's schema (its field-by-field 422) nor of what the parser refuses.
"""

from dataclasses import dataclass
from datetime import datetime

from ninja import Path, Schema, Status
from pydantic import ConfigDict, Field

from audit.chain import Actor
from runs.machine.storable import unstorable_texts
from runs.waiting import events, payloads

from .parser import refuse_unknown_query
from .routes import api
from .schemas import NO_NUL, Error, InvalidRequest

_HEADERS = {"responses": {429: {"headers": {"Retry-After": {
    "description": "Seconds until the token's rate-limit window resets.",
    "schema": {"type": "integer"}}}}}}


class EventIn(Schema):
    # A misspelt field ("payloads") would otherwise be dropped and the event delivered,
    # once and for good under its id, without what the sender meant to send.
    model_config = ConfigDict(extra="forbid")

    workflow: str = Field(min_length=1, max_length=200, pattern=NO_NUL)
    event: str = Field(min_length=1, max_length=200, pattern=NO_NUL,
                       description="The event's name, as the waiting step declares it.")
    event_id: str = Field(min_length=1, max_length=200, pattern=NO_NUL,
                          description="Unique per source, not blank, without control "
                                      "characters: a redelivery with "
                                      "the same id and payload changes nothing; with "
                                      "another payload, event or correlation key it is "
                                      "refused (409).")
    correlation_key: str = Field(min_length=1, max_length=300, pattern=NO_NUL,
                                 description="Matches the run: by default its business "
                                             "key. Not blank, and without control "
                                             "characters, as the event_id.")
    payload: dict = Field(default_factory=dict, description="Checked against the waiting "
                          "step's schema; its text may hold no NUL characters, its "
                          f"objects and lists may nest at most {events.MAX_PAYLOAD_DEPTH} "
                          "levels deep, and as JSON it may be at most RUNS_INPUT_MAX_BYTES "
                          "(as a run's input).")


class EventReceipt(Schema):
    status: str = Field(description="delivered (to the waiting run), kept (no run that "
                                    "listens waits for it yet: for the next run that waits "
                                    "under its key; where a person ended the run whose "
                                    "business key it is, left for a person, not delivered "
                                    "if the run is reopened) or duplicate (received before)")
    run_id: int | None = None
    keep_until: datetime | None = Field(
        None, description="Only for kept (for a run that will wait for it), and for a duplicate "
                          "of an event not delivered: until when the event is kept for a run to "
                          "reach its wait (RUNS_EVENT_KEEP_SECONDS after it came, by the "
                          "server's database clock). Past it the event expires and is never "
                          "delivered: send it again, under a new event_id, if it is still "
                          "meant. Absent for a delivered event, and for one left for a person.")


class BadSignature(Exception):
    """A signed event from an unknown source, out of its time window or wrongly signed
    (401, naming which check failed, never the secret)."""


@dataclass(frozen=True)
class SigningSource:
    """Who sent a signed event: the source the signature proved, and its settings
    (RUNS_EVENT_SOURCES)."""

    name: str
    config: dict

    @property
    def actor_label(self) -> str:
        return f"webhook:{self.name}"


def signed_source(request) -> SigningSource:
    """The webhook operation's authentication, run by ninja before the body is parsed or
    validated: the source named in the path, if the request is signed with its secret."""
    source = request.resolver_match.kwargs.get("source", "")
    try:
        config = events.verify_webhook(
            source, timestamp=request.headers.get("X-Event-Timestamp", ""),
            sent_signature=request.headers.get("X-Event-Signature", ""), body=request.body)
    except payloads.EventRefused as exc:
        raise BadSignature(str(exc)) from exc
    return SigningSource(source, config)


@api.exception_handler(BadSignature)
def _bad_signature(request, exc):
    return api.create_response(request, {"error": "bad_signature", "detail": str(exc)},
                               status=401)


def _invalid(detail: str, errors: list[dict]):
    return Status(422, {"error": "invalid_input", "detail": detail, "errors": errors})


def _receive(payload: EventIn, *, source: str, actor: Actor):
    try:
        # Before anything walks the payload (the checks below and redaction recurse).
        events.refuse_too_deep(payload.payload)
    except payloads.EventRefused as exc:
        return _invalid(str(exc), [{**e, "type": "value_error"} for e in exc.errors])
    # What the database cannot store is named field by field, before anything is looked up.
    problems = unstorable_texts(payload.payload, ["payload"])
    if problems:
        return _invalid("the payload holds text that cannot be stored", problems)
    try:
        receipt = events.receive_event(
            workflow=payload.workflow, event=payload.event, key=payload.correlation_key,
            event_id=payload.event_id, source=source, payload=payload.payload, actor=actor)
    except payloads.EventRefused as exc:
        if exc.errors:
            return _invalid(str(exc), [{**e, "type": "value_error"} for e in exc.errors])
        return Status(404, {"error": "unknown_event", "detail": str(exc)})
    except payloads.EventIdReused as exc:
        return Status(409, {"error": "event_id_reused", "detail": str(exc)})
    status = 200 if receipt.status == "duplicate" else 202
    answer = {"status": receipt.status, "run_id": receipt.run_id}
    if receipt.keep_until is not None:
        # Only then (the operations answer with exclude_unset): a delivered event has no
        # keep time, and a sender reading the field would take null for "kept for ever".
        answer["keep_until"] = receipt.keep_until
    return Status(status, answer)


_RESPONSES = {200: EventReceipt, 202: EventReceipt, 400: Error, 401: Error, 403: Error,
              404: Error, 409: Error, 422: InvalidRequest, 429: Error}


@api.post("/events", url_name="receive_event", operation_id="receive_event",
          summary="Send an external event", response=_RESPONSES, openapi_extra=_HEADERS,
          exclude_unset=True,
          description="202: delivered to the run waiting for it, or kept for the run that "
                      "will wait for it until keep_until, when it expires undelivered (for a "
                      "person, with no keep_until, where a person ended the run whose "
                      "business key it is). 200: "
                      "this source and id were received before; "
                      "nothing changed. 409: this source and id "
                      "were received before with another payload, event or correlation "
                      "key; nothing changed (send it "
                      "under a new id). 422: the "
                      "payload does not match the waiting step's schema, is too large, or "
                      "the id or the correlation key is blank or holds control "
                      "characters, or a query parameter "
                      "was sent (this operation takes none). 404: no such workflow or "
                      "event. 403: the token may not use the workflow.")
def receive(request, payload: EventIn):
    # Everything the event is travels in the body: an id or a key put in the query string
    # (or one sent twice there) would be ignored, and the event delivered without it.
    if (refused := refuse_unknown_query(request, ())) is not None:
        return refused
    token = request.auth
    if not token.may_use(payload.workflow):
        return Status(403, {"error": "workflow_not_allowed",
                            "detail": f"this token may not send events to {payload.workflow}"})
    # The source as its column holds it: a token's name may be as long as the column.
    return _receive(payload, source=events.fitting_source(token.actor_label),
                    actor=Actor.system(token.actor_label))


@api.post("/events/webhook/{source}", url_name="event_webhook", auth=signed_source,
          operation_id="receive_signed_event", summary="Send an external event, signed",
          response=_RESPONSES, exclude_unset=True,
          description="For a source configured in RUNS_EVENT_SOURCES. Headers: "
                      "X-Event-Timestamp (seconds since the epoch, within 300 s of now) and "
                      "X-Event-Signature (hex HMAC-SHA256 of '<timestamp>.<raw body>' with "
                      "the source's secret). 401 if either check fails. Otherwise as POST "
                      "/events: the body is read only once both checks pass.")
def receive_signed(request, payload: EventIn, source: str = Path(..., max_length=100)):
    if (refused := refuse_unknown_query(request, ())) is not None:
        return refused
    sender = request.auth
    allowed = sender.config.get("workflows")
    if allowed is not None and payload.workflow not in allowed:
        return Status(403, {"error": "workflow_not_allowed",
                            "detail": f"source {source} may not send events to "
                                      f"{payload.workflow}"})
    return _receive(payload, source=events.fitting_source(sender.actor_label),
                    actor=Actor.system(sender.actor_label))
