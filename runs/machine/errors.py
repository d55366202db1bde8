"""Error classes and the classification of every failure before any retry.

Every side-effecting call ends succeeded, failed (evidence that nothing changed) or unknown
(it may have happened). Classification decides which, from the exception alone, so that the
executor never guesses: an unknown outcome is never relabelled failed.
"""

from dataclasses import dataclass

import httpx
import openai

from ..models import ErrorClass
from .redaction import redact_text
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


class ReasonRequired(TransitionNotAllowed, ValueError):
    """An operator transition was called without a reason, or with one no record keeps
    (storable.person_text_problem: too long, NUL); nothing changed."""


class EvidenceRequired(TransitionNotAllowed, ValueError):
    """An outcome was settled (found, or not found) without saying what established it;
    nothing changed."""


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
        object.__setattr__(self, "message", printable(self.message))


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
    """The seconds of a response's Retry-After header (None without one, or unreadable)."""
    value = response.headers.get("Retry-After")
    try:
        return max(float(value), 0.0) if value is not None else None
    except ValueError:
        return None


# The failures of a model endpoint (openai client), read as a step's errors.
MODEL_CALL_ERRORS = (openai.APIConnectionError, openai.APIStatusError)


def model_call_error(exc: openai.APIConnectionError | openai.APIStatusError) -> StepError:
    """A model endpoint's failure as a step error: unreachable or too slow, a 429 (with its
    Retry-After) and a 5xx are transient; a 501 (the endpoint does not do this at all, and
    never will) and any other 4xx are permanent."""
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
    arguments' hashes.
    """
    message = redact_text(f"{type(exc).__name__}: {exc}")[:2000]
    if isinstance(exc, StepError):
        return Classified(exc.error_class, message, getattr(exc, "retry_after", None))
    if non_retryable and isinstance(exc, non_retryable):
        return Classified(ErrorClass.PERMANENT, message)
    if isinstance(exc, httpx.HTTPStatusError):
        status = exc.response.status_code
        message = redact_text(f"HTTP {status} from {exc.request.url.host}{exc.request.url.path}: "
                              f"{exc.response.text[:500]}")
        reused = key_reused(exc.response)
        if reused is not None:
            return Classified(ErrorClass.PERMANENT, redact_text(str(reused)))
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
    return Classified(ErrorClass.UNCLASSIFIED, message)
