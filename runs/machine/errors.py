"""Error classes and the classification of every failure before any retry.

Every side-effecting call ends succeeded, failed (evidence that nothing changed) or unknown
(it may have happened). Classification decides which, from the exception alone, so that the
executor never guesses: an unknown outcome is never relabelled failed.
"""

import math
import numbers
import re
from dataclasses import dataclass

import httpx
from billiard.common import terminate_handler_fired
from billiard.exceptions import SoftTimeLimitExceeded

from audit.redaction import redact_text

from ..models import ErrorClass
from .sensitive import UnreadableValue
from .storable import printable


class StepError(Exception):
    """Base of the errors step code may raise to say what happened."""

    error_class: str = ErrorClass.UNCLASSIFIED


class TransientError(StepError):
    """Nothing changed and trying again later may work (connection refused, 429, 503)."""

    error_class = ErrorClass.TRANSIENT

    def __init__(self, message: str = "", *, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class PermanentError(StepError):
    """Nothing changed and trying again will not help (400, 401/403, policy rejection)."""

    error_class = ErrorClass.PERMANENT


class UnknownOutcome(StepError):
    """The action may or may not have taken effect; only a lookup by key can tell."""

    error_class = ErrorClass.UNKNOWN


class IdempotencyKeyReused(PermanentError):
    """The receiver holds an earlier request with this idempotency key and other arguments,
    and refused this one (HTTP 422, code `idempotency_key_reused`): it kept the first and did
    nothing now. Sending again cannot help, since the key stays while the arguments changed
    (a new decision, a step whose code changed without a new version): a person decides."""

    error_class = ErrorClass.KEY_REUSED

    def __init__(self, *, key: str, first_hash: str, request_hash: str, receiver: str = ""):
        where = f" at {receiver}" if receiver else ""
        super().__init__(
            f"idempotency key {key} was used before with other arguments{where}: first "
            f"request's arguments sha256 {first_hash or '?'}, this request's sha256 "
            f"{request_hash or '?'}. The receiver refused this request and kept the first; "
            "not sent again")
        self.key = key
        self.first_hash = first_hash
        self.request_hash = request_hash


# What a lookup finds under a key its receiver said holds an earlier request with other
# arguments is that request's effect (transitions.lookup_verdicts.looked_up_verdict): recorded as
# this one's, the run would go on as if it had done what it never asked for.
KEY_HOLDS_ANOTHER_REQUEST = (
    "the key holds an earlier request with other arguments (key_reused): what the lookup "
    "found is that request's effect, not this one's; record what this one did by hand, with "
    "evidence, or retry it once its arguments match")


class ModelFormatError(StepError):
    """A model's output failed its schema; the invalid output is kept for diagnosis."""

    error_class = ErrorClass.MODEL_FORMAT

    def __init__(self, message: str, *, output=None):
        super().__init__(message)
        self.output = output


class TransitionNotAllowed(Exception):
    """A transition was asked for from a state that does not allow it; nothing changed."""


class NoSuchStep(TransitionNotAllowed, LookupError):
    """An operator transition was aimed at a step the run does not have: the caller's input
    to correct, not the run's state; nothing changed."""

    field = "step"  # the input field to correct, for a door to mark (ActionInputError.field)


class ReasonRequired(TransitionNotAllowed, ValueError):
    """An operator transition was called without a reason, or with one no record keeps
    (storable.person_text_problem: too long, NUL); nothing changed."""

    field = "reason"


class EvidenceRequired(TransitionNotAllowed, ValueError):
    """An outcome was settled (found, or not found) without saying what established it;
    nothing changed."""

    field = "evidence"


class SecondPersonRequired(TransitionNotAllowed):
    """The action ends a run or undoes or abandons its effects after a high-impact effect
    took place: it needs a second person's approval, and none (or the actor's own) was
    given. Nothing changed."""


class StartRefused(Exception):
    """A run could not be started; nothing was written."""


class UnknownWorkflow(StartRefused):
    pass


class InvalidInput(StartRefused):
    def __init__(self, message: str, *, errors: list[dict] | None = None):
        super().__init__(message)
        self.errors = errors or []


class BusinessKeyConflict(StartRefused):
    def __init__(self, message: str, *, run_id: int):
        super().__init__(message)
        self.run_id = run_id


class RunArchived(StartRefused):
    """The business key belongs to a run that finished and was moved to an archive file:
    nothing was started (the key is never reused by accident). `archived` is the tombstone
    (the archive app's ArchivedRun, see runs.machine.retention); `same_input` says whether this is
    the same start event delivered again or another input for the same key."""

    def __init__(self, message: str, *, archived, same_input: bool):
        super().__init__(message)
        self.archived = archived
        self.same_input = same_input


@dataclass(frozen=True)
class Classified:
    error_class: str
    message: str
    retry_after: float | None = None

    def __post_init__(self):
        # A remote system's error text goes into the step's row and the audit chain: a NUL
        # in it would make the database refuse the very checkpoint that records the error.
        message = self.message
        # Every classified error comes through here, so here is where a retry_after is read
        # (read_retry_after): what it cannot read is ignored, and the message says so.
        seconds, problem = read_retry_after(self.retry_after)
        if problem:
            message = f"{message} ({problem})"
        object.__setattr__(self, "retry_after", seconds)
        object.__setattr__(self, "message", printable(message))


# The longest wait a retry_after may ask for (ten years): beyond it no clock adds it (a
# datetime ends at year 9999) and no budget holds it.
MOST_RETRY_AFTER = 10 * 365 * 86400.0
# Seconds as a Retry-After header writes them (delay-seconds), or with a decimal fraction.
_SECONDS_TEXT = re.compile(r"[0-9]+(?:\.[0-9]+)?")


def read_retry_after(raw) -> tuple[float | None, str | None]:
    """The one reading of how long an error says to wait before the next attempt: (seconds,
    None), or (None, why it was ignored) so that the policy's own backoff is used instead.
    A number of seconds, or text of one (a Retry-After header's delay-seconds), from 0 to
    MOST_RETRY_AFTER is read; anything else (other text, an HTTP date, a bool, NaN, an
    infinity, a negative number or one too large for any clock) is ignored."""
    if raw is None:
        return None, None
    seconds = None
    if isinstance(raw, str):
        text = str.__str__(raw).strip()
        if _SECONDS_TEXT.fullmatch(text):
            seconds = float(text)
    elif isinstance(raw, numbers.Real) and not isinstance(raw, bool):
        try:
            seconds = float(raw)
        except (OverflowError, ValueError, TypeError):
            seconds = math.inf
    else:
        return None, _ignored(raw, "is not a number of seconds")
    if seconds is None:
        return None, _ignored(raw, "is not a number of seconds")
    if not 0 <= seconds <= MOST_RETRY_AFTER:  # NaN fails both comparisons
        return None, _ignored(raw, f"is out of range (0 to {MOST_RETRY_AFTER:.0f} seconds)")
    return seconds, None


def _ignored(raw, why: str) -> str:
    return (f"its retry_after {_shown(raw)} {why}: ignored, the retry policy's own backoff "
            "is used")


def _shown(value, most: int = 60) -> str:
    """A short form of a value for a message, which never raises (an int too long for
    Python to write out, a repr that fails)."""
    try:
        text = repr(value)
    except Exception:
        return f"(a {type(value).__name__} that cannot be written out)"
    if not isinstance(text, str):
        return f"(a {type(value).__name__})"
    text = str.__str__(text)
    return redact_text(text if len(text) <= most else f"{text[:most]}...")


# What a call of workflow code (a step, a tool, an undo, a lookup, a model turn, a
# description) may raise as its own failure, recorded as the call's outcome: every Exception,
# and the two exits plain Python code raises of itself (a library's sys.exit(), a
# GeneratorExit let out of a generator). Let out, they would end the worker's process with
# the call unrecorded, again after each take-back. KeyboardInterrupt is left to propagate: it
# is a person interrupting the process (advance_run at a terminal), whose run is taken back
# and its call settled by key, as after any crash. So is the SystemExit of a process being
# stopped (process_stopping): classify raises it again.
CODE_FAILURES = (Exception, SystemExit, GeneratorExit)


def process_stopping(exc: BaseException) -> bool:
    """Whether `exc` is this process being stopped, not the code it was running: the
    SystemExit a prefork pool process of Celery (billiard) raises from its SIGTERM handler,
    wherever the process is. A pool process gets SIGTERM from the pool's hard time limit
    (--time-limit, just before its SIGKILL), from a stop sent to the worker's whole process
    group (systemd's default KillMode, `kill -- -PGID`) and from the pool shutting down."""
    return isinstance(exc, SystemExit) and terminate_handler_fired()


def raise_if_process_stopping(exc: BaseException) -> None:
    """Raise `exc` again if it is this process being stopped (process_stopping), from
    wherever workflow code's failure is caught (classify, and the hooks called outside a
    step's call: a sleep's until(), an event wait's correlate(), at the start and at the
    wait, a step's describe()). Taken for the code's own failure, it would hold its run for a person
    as the code's error; raised, the process ends as in a crash and the run is taken back
    when its lease ends."""
    if process_stopping(exc):
        raise exc


def described(exc: BaseException) -> str:
    """"TypeName: message" of an exception, which never raises: an exception whose message
    cannot be read (its __str__ raises) is described by its type name, saying so."""
    name = type(exc).__name__
    try:
        text = str(exc)
    except Exception as problem:
        try:
            why = f"{type(problem).__name__}: {str(problem)[:200]}"
        except Exception:
            why = type(problem).__name__
        return f"{name} (its message could not be read: {why})"
    return f"{name}: {str.__str__(text)}"


class _Unreadable:
    """A retry_after attribute that raised when read."""

    def __repr__(self) -> str:
        return "(which could not be read)"


_UNREADABLE = _Unreadable()

_TRANSIENT_STATUSES = {429, 503}
# The server failed while handling the request: it may have committed first.
_UNKNOWN_STATUSES = {500, 502, 504}
# Not Implemented: the server does not support the request at all, so it did nothing (a
# definite "not done", like a 4xx, and no later attempt will find it implemented).
_NOT_DONE_STATUSES = {501}
# How a receiver says that an idempotency key came back with other arguments.
KEY_REUSED_CODE = "idempotency_key_reused"


def key_reused(response: httpx.Response) -> IdempotencyKeyReused | None:
    """The refusal of a key reused with other arguments, read from a receiver's answer (HTTP
    422 whose JSON body has code `idempotency_key_reused`, the key, and the sha256 of the
    first request's arguments and of this one's), or None for any other answer."""
    if response.status_code != 422:
        return None
    try:
        body = response.json()
    except ValueError:
        return None
    if not isinstance(body, dict):
        return None
    detail = body.get("error") if isinstance(body.get("error"), dict) else body
    if detail.get("code") != KEY_REUSED_CODE:
        return None
    key = str(detail.get("idempotency_key") or response.request.headers.get(
        "Idempotency-Key", "?"))
    return IdempotencyKeyReused(
        key=key[:200], first_hash=str(detail.get("first_request_sha256") or "")[:64],
        request_hash=str(detail.get("request_sha256") or "")[:64],
        receiver=f"{response.request.url.host}{response.request.url.path}")


def retry_after_of(response: httpx.Response) -> float | None:
    """The seconds of a response's Retry-After header (None without one, or unreadable), as
    read_retry_after reads them."""
    return read_retry_after(response.headers.get("Retry-After"))[0]


def model_call_errors() -> tuple[type[Exception], ...]:
    """The failures of a model endpoint (the openai client), for an `except` clause, which
    evaluates it only once something was raised. The openai package is imported by the
    processes that ask a model, when they do: it takes most of a second, which every command
    and every worker would otherwise pay at its start."""
    import openai

    return (openai.APIConnectionError, openai.APIStatusError)


def model_call_error(exc: Exception) -> StepError:
    """A model endpoint's failure (one of model_call_errors) as a step error: unreachable or
    too slow, a 429 (with its Retry-After) and a 5xx are transient; a 501 (the endpoint does
    not do this at all, and never will) and any other 4xx are permanent."""
    import openai

    if isinstance(exc, openai.APIConnectionError):  # includes APITimeoutError
        return TransientError(f"model endpoint unreachable or too slow: {type(exc).__name__}")
    if isinstance(exc, openai.RateLimitError):
        return TransientError("model endpoint rate limit (HTTP 429)",
                              retry_after=retry_after_of(exc.response))
    error = TransientError if exc.status_code >= 500 and exc.status_code != 501 \
        else PermanentError
    return error(f"model endpoint refused: HTTP {exc.status_code}: {_error_detail(exc.body)}")


def _error_detail(body) -> str:
    """The message of an API error body ({"message": ...} or a plain string), shortened."""
    if isinstance(body, dict):
        body = body.get("message") or body.get("error") or body
    return str(body)[:300]


def classify(exc: BaseException, *,
             non_retryable: tuple[type[BaseException], ...] = ()) -> Classified:
    """Classify an exception raised by step code.

    httpx errors are classified by when they happened: a failure to connect means the
    request never left (transient); a timeout or broken connection after sending means the
    receiver may have committed (unknown). HTTP statuses: 429/503 transient (honouring
    Retry-After), 500/502/504 unknown, other 4xx and 501 permanent; a 422 refusing a key
    reused with other arguments is permanent and says so, naming the key and both
    arguments' hashes. A sealed value that cannot be opened (sensitive.UnreadableValue) is
    unreadable: the effect machine says whether anything may have been sent (effects.fail).
    """
    # Every call of workflow code has its failure classified here. A process on its way
    # out, recorded as the call's own failure, would hold its run for a person as an
    # "unexpected error" (and a worker's stop, every run in flight). Raised again, it ends
    # the process with the intent in the row, as a crash does: the run is taken back when
    # its lease ends and the call settled by key.
    raise_if_process_stopping(exc)
    message = redact_text(described(exc))[:2000]
    if isinstance(exc, StepError):
        try:
            retry_after = getattr(exc, "retry_after", None)
        except Exception:
            retry_after = _UNREADABLE
        return Classified(exc.error_class, message, retry_after)
    if isinstance(exc, UnreadableValue):
        # The cure is the key ring, not the code; whether anything was sent is the effect
        # machine's to say (effects.fail: a tool's arguments are opened before the call, an
        # earlier result as the step's code reads it). Before non_retryable: it is the
        # runtime's error, not the step's. The message names the key (sensitive.decrypt).
        return Classified(ErrorClass.UNREADABLE, f"{message}: put the key it was sealed "
                          "with back in FIELD_ENCRYPTION_KEYS on every worker (after the "
                          "current key)")
    if non_retryable and isinstance(exc, non_retryable):
        return Classified(ErrorClass.PERMANENT, message)
    if isinstance(exc, httpx.HTTPStatusError):
        status = exc.response.status_code
        message = redact_text(f"HTTP {status} from {exc.request.url.host}{exc.request.url.path}: "
                              f"{exc.response.text[:500]}")
        reused = key_reused(exc.response)
        if reused is not None:
            return Classified(reused.error_class, redact_text(str(reused)))
        if status in _NOT_DONE_STATUSES:
            return Classified(ErrorClass.PERMANENT, f"{message} (not implemented: the "
                              "receiver did nothing)")
        if status in _TRANSIENT_STATUSES:
            return Classified(ErrorClass.TRANSIENT, message, retry_after_of(exc.response))
        if status in _UNKNOWN_STATUSES:
            return Classified(ErrorClass.UNKNOWN, message)
        if 400 <= status < 500:
            return Classified(ErrorClass.PERMANENT, message)
        return Classified(ErrorClass.UNKNOWN, message)
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout):
        return Classified(ErrorClass.TRANSIENT, message)
    if isinstance(exc, httpx.TimeoutException | httpx.NetworkError | httpx.RemoteProtocolError):
        return Classified(ErrorClass.UNKNOWN, message)
    if isinstance(exc, SoftTimeLimitExceeded):
        # Raised wherever the task is when the worker's soft time limit passes, as the
        # runtime's own deadline interrupts a call (deadline.DeadlinePassed): the call may
        # have acted. Unclassified, it held the run for a person as a code error.
        return Classified(ErrorClass.UNKNOWN, f"{message} (the worker's soft time limit, "
                          "--soft-time-limit, interrupted the call: it may have acted)")
    if isinstance(exc, SystemExit | GeneratorExit):
        message = f"{message} (workflow code exited its call: recorded as its failure; the " \
                  "worker goes on)"
    return Classified(ErrorClass.UNCLASSIFIED, message)
