"""One chained record per effect: the intent of an attempt is checkpointed in its row (a
step, running or compensating, or an agent's tool call), committed before the effect; the
one audit record that ends the attempt (its outcome, or the take-back of a dead worker's
lease) carries that intent (key, what it would do, when it started) with the outcome
(remote reference, a digest of the result). Change.audit adds it; nothing else writes it."""

import hashlib
import json

from audit.actions import AuditAction
from audit.redaction import outside_texts_masked

from ...models import Step, StepStatus

# The records that end an attempt whose intent is checkpointed in the step's row (status
# running, or compensating for its undo): its outcome, or the take-back of a dead worker's
# lease. Each carries the intent (see intent_of); no record is written for the intent itself.
ATTEMPT_ENDS = frozenset({
    AuditAction.SUCCEEDED, AuditAction.FAILED, AuditAction.OUTCOME_UNKNOWN,
    AuditAction.RETRY_SCHEDULED, AuditAction.MODEL_OUTPUT_REJECTED, AuditAction.ATTENTION,
    AuditAction.STEP_LEASE_EXPIRED,
    AuditAction.COMPENSATION_SUCCEEDED, AuditAction.COMPENSATION_FAILED,
    AuditAction.COMPENSATION_RETRY_SCHEDULED,
})

OPEN_INTENTS = frozenset({StepStatus.RUNNING, StepStatus.COMPENSATING})


# json.dumps with these options would build a new encoder for every result.
_canonical = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=str).encode


def result_digest(value) -> str:
    """sha256 of a result's canonical JSON: the record proves what was stored without
    holding it (the row holds it, redacted or sealed)."""
    return hashlib.sha256(_canonical(value).encode()).hexdigest()


def intent_of(row, *, undo: bool = False) -> dict:
    """The intent checkpointed in an effect's row (a Step, or an agent's ToolCall: their
    fields share names), with what its attempt ended with: the data of the one record of
    that attempt, its texts from outside masked (outside_texts_masked). `undo`: the attempt
    was its compensation."""
    began = row.attempt_started_at.isoformat() if row.attempt_started_at else None
    if undo:
        return outside_texts_masked({
            "key": row.compensation_key, "attempt": row.compensation_attempt,
            "started_at": began, "remote_ref": row.compensation_ref})
    intent = {"key": row.idempotency_key, "attempt": row.attempt, "started_at": began,
              "remote_ref": row.remote_ref}
    # What it would do: a step's one-line intended action, a call's arguments by hash.
    if isinstance(row, Step):
        intent["will_do"] = row.intended_action
    else:
        intent["args_hash"] = row.args_hash
    if row.status == StepStatus.SUCCEEDED:
        intent["result_sha256"] = result_digest(row.result)
    return outside_texts_masked(intent)
