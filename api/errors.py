"""The integration API's error answers, one shape for every route: {"error": code,
"detail": words} (schemas.Error)."""

from django.db import InterfaceError, OperationalError
from ninja import Status

from runs.execution.database_outage import (
    commit_under_way,
    connections_full,
    connections_full_detail,
    refused_change_detail,
    refuses_writes,
    would_not_wait,
)
from runs.execution.lost_commit import COMMITTED, NOT_COMMITTED, commit_outcome


def error_body(code: str, detail: str) -> dict:
    return {"error": code, "detail": detail}


def no_acting_user(token, to_do: str) -> Status:
    """403 for a token no person was named on: what it changes is done for a person (the
    audit trail names them, with their permission), never for the token's maker."""
    return Status(403, error_body(
        "no_acting_user", f"token {token.name} acts for nobody: an admin names the person it "
                          f"acts for (acting user) before it can {to_do}"))


def invalid_field(field: str, detail: str, kind: str = "value_error") -> dict:
    """The 422 body (schemas.InvalidRequest) for one body field the runtime refused after
    the schema passed it: `errors` names the field as a schema refusal would, so a client
    shows it beside that field whichever check refused it."""
    return {"error": "invalid_request", "detail": detail,
            "errors": [{"loc": [field], "msg": detail, "type": kind}]}


# The database not answering (down, restarting, failing over): the request did nothing (unless
# the connection went as it committed: database_down_answer says what the database says of
# it), and trying again later is what to do, which a 503 with Retry-After says to people,
# browsers, load balancers and clients alike (the API here, the console's pages in
# console.errors).
DATABASE_DOWN = (OperationalError, InterfaceError)
RETRY_AFTER_SECONDS = 30
# The code of the 503 whose change the database says it committed, though its answer was
# lost: done, nothing to try again (no Retry-After).
DONE_ANSWER_LOST = "done_answer_lost"


def refused_change(exc: BaseException) -> tuple[str, str] | None:
    """The 503's code and words for a database that refuses writes (read-only, a standby),
    or None for any other error: a client tries again later, as for a database away, and
    the person reading it is not told of an internal error."""
    if refuses_writes(exc):
        return "database_read_only", refused_change_detail(exc)
    return None


def database_down_answer(exc: BaseException) -> tuple[str, str]:
    """The code and the words of the API's 503 for `exc` (one of DATABASE_DOWN). One that
    would not wait (a row held by another session, a statement cancelled) is not told as a
    database that does not answer, which would send the on-call person to the wrong place.
    A connection lost as the change was committed is told as the database answers when
    asked afterwards (runs.execution.lost_commit): done (DONE_ANSWER_LOST), not done, or,
    where that cannot be told, that it may have been done."""
    if would_not_wait(exc):
        return "database_unavailable", (
            "a record this needed was held by another session for too long, or the "
            "statement was cancelled; nothing was done: try again in a little while")
    if commit_under_way(exc):
        outcome = commit_outcome(exc)
        if outcome == COMMITTED:
            return DONE_ANSWER_LOST, (
                "the connection to the database was lost as this was being committed, and "
                "the database says it committed it: it was done; read it back (the run, the "
                "approval request or the bulk job) to see what it left, and do not send it "
                "again")
        if outcome == NOT_COMMITTED:
            return "database_unavailable", (
                "the connection to the database was lost as this was being committed, and "
                "the database says it did not commit it: it was not done; try again")
        return "database_unavailable", (
            "the connection to the database was lost as this was being committed, so it "
            "may have been done: read it back before sending it again (an action already "
            "taken is refused, a decision already recorded is answered as such)")
    if connections_full(exc):
        return "database_unavailable", connections_full_detail(exc)
    return "database_unavailable", "the database did not answer; nothing was done: try again later"
