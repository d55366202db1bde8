"""The fault queue: which faults exist, for which endpoints, and who gets the next one.

Faults make the simulated systems fail the way real ones do, on demand, so that every
recovery path of the runtime can be shown and tested against real HTTP. Each endpoint has
its own queue; the next call to an endpoint consumes its oldest fault. The management command
`fault` and the /sandbox/faults endpoint (for holders of sandbox.queue_fault) both go through
this module, so the rules (what is valid, what consuming means) live in one place. What each
kind does to an HTTP exchange is demo.sandbox.injection's business.
"""

from django.db import transaction
from django.db.models import F, Sum

from runs.machine.storable import out_of_range, whole_number

from .models import Fault

ENDPOINTS = {
    "invoices.read": "GET /sandbox/invoices/<number>",
    "tracker.create": "POST /sandbox/tracker/tasks",
    "tracker.lookup": "GET /sandbox/tracker/tasks?key=",
    "tracker.cancel": "POST /sandbox/tracker/tasks/<id>/cancel",
    "messenger.send": "POST /sandbox/messenger/messages",
    "messenger.lookup": "GET /sandbox/messenger/messages?client_reference=",
    "ledger.post": "POST /sandbox/ledger/entries",
    "ledger.lookup": "GET /sandbox/ledger/entries?transaction_ref=",
    "customers.create": "POST /sandbox/customers",
    "customers.lookup": "GET /sandbox/customers?key=",
    "payments.update": "POST /sandbox/payments/status",
    "payments.lookup": "GET /sandbox/payments/status?key=",
    "vendors.lookup": "GET /sandbox/vendors?name=",
    "model.chat": "POST /sandbox/model/v1/chat/completions",
}

UNAVAILABLE = "unavailable"
RATE_LIMIT = "rate_limit"
FORBIDDEN = "forbidden"
NOT_IMPLEMENTED = "not_implemented"
COMMIT_THEN_TIMEOUT = "commit_then_timeout"
COMMIT_THEN_RESET = "commit_then_reset"
MALFORMED = "malformed"
SLOW = "slow"
NOT_A_COMPLETION = "not_a_completion"
EMPTY_ANSWER = "empty_answer"
LARGE_ANSWER = "large_answer"
OVERSIZED_ANSWER = "oversized_answer"

KINDS = {
    UNAVAILABLE: "503 before any change",
    RATE_LIMIT: "429 with Retry-After: 1, no change",
    FORBIDDEN: "403, no change",
    NOT_IMPLEMENTED: "501, no change",
    COMMIT_THEN_TIMEOUT: "commit the change, then hold the answer SANDBOX_HOLD_SECONDS",
    COMMIT_THEN_RESET: "commit the change, then drop the connection mid-response",
    MALFORMED: "model.chat only: answer with output that fails its schema: a classification "
               "that is none, or an agent's tool calls with arguments that are not JSON (an "
               "agent's final answer or summary, which no schema reads, comes as it is)",
    SLOW: "wait SANDBOX_HOLD_SECONDS, then act and answer normally",
    NOT_A_COMPLETION: "model.chat only: answer 200 with an HTML page, no chat completion",
    EMPTY_ANSWER: "model.chat only: a chat completion with neither text nor tool calls, "
                  "whatever it was asked: a classification, an agent's turn or a summary",
    LARGE_ANSWER: "act, then answer with the JSON padded past RUNS_RESULT_INLINE_BYTES",
    OVERSIZED_ANSWER: "act, then answer with the JSON padded past RUNS_RESULT_MAX_BYTES",
}
MODEL_ONLY_KINDS = {MALFORMED: "model.chat", NOT_A_COMPLETION: "model.chat",
                    EMPTY_ANSWER: "model.chat"}


class FaultError(ValueError):
    """A fault request that names an unknown endpoint or kind, or a bad count."""


# What Fault.remaining (a PostgreSQL integer) holds: far more calls than any drill makes.
MOST_TIMES = 2**31 - 1


def validate(endpoint: str, kind: str, times: int = 1) -> None:
    """Raise FaultError, listing what is valid, unless the fault can be queued."""
    if endpoint not in ENDPOINTS:
        raise FaultError(f"unknown endpoint {endpoint!r}; valid endpoints: "
                         f"{', '.join(ENDPOINTS)}")
    if kind not in KINDS:
        raise FaultError(f"unknown fault kind {kind!r}; valid kinds: {', '.join(KINDS)}")
    only = MODEL_ONLY_KINDS.get(kind)
    if only and endpoint != only:
        raise FaultError(f"fault kind {kind!r} applies only to the endpoint {only!r}")
    if isinstance(times, bool) or not isinstance(times, int) or not 1 <= times <= MOST_TIMES:
        raise _times_refused(times)


def parse_times(value) -> int:
    """The number of calls a fault should hit, from a form or JSON value (default 1)."""
    if value is None or value == "":
        return 1
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and (number := whole_number(value.strip())) is not None:
        return number  # ASCII digits only: "٣" is no count anyone wrote
    raise _times_refused(value)


def _times_refused(value) -> FaultError:
    """A count of calls out of range, or no count, refused as every command refuses one
    (storable.out_of_range)."""
    number = isinstance(value, int) and not isinstance(value, bool)
    return FaultError(out_of_range("times", low=1, high=MOST_TIMES,
                                   given=value if number else repr(value)))


def add(endpoint: str, kind: str, times: int = 1) -> Fault:
    """Queue a fault for the next `times` calls to `endpoint`, behind any already queued."""
    validate(endpoint, kind, times)
    return Fault.objects.create(endpoint=endpoint, kind=kind, remaining=times)


def pending() -> list[Fault]:
    return list(Fault.objects.order_by("created_at", "pk"))


def pending_count() -> int:
    return Fault.objects.aggregate(n=Sum("remaining"))["n"] or 0


def clear() -> int:
    """Remove every queued fault; returns how many queue entries there were."""
    deleted, _ = Fault.objects.all().delete()
    return deleted


def consume(endpoint: str) -> str | None:
    """Take one use of the oldest fault queued for `endpoint` and return its kind (None when
    the queue is empty).

    Committed in its own transaction before the endpoint does anything, so that a fault is
    spent even when the call it hits then fails. Concurrent calls wait for the row lock, so
    "the next N calls" means exactly N: one use of a fault is never applied to two calls
    and never skipped. (SQLite has no row locks; its immediate transactions serialise
    writers, which gives the same guarantee.)
    """
    with transaction.atomic():
        fault = (Fault.objects.filter(endpoint=endpoint).order_by("created_at", "pk")
                 .select_for_update().first())
        if fault is None:
            return None
        if fault.remaining <= 1:
            fault.delete()
        else:
            Fault.objects.filter(pk=fault.pk).update(remaining=F("remaining") - 1)
        return fault.kind
