"""One chained record per effect: the intent of an attempt is checkpointed in its row (a
step, running or compensating, or an agent's tool call), committed before the effect; the
one audit record that ends the attempt (its outcome, or the take-back of a dead worker's
lease) carries that intent (key, what it would do, when it started) with the outcome
(remote reference, a digest of the result). Change.audit adds it; nothing else writes it."""

import hashlib
import json

from audit.actions import AuditAction

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


def result_digest(value) -> str:
    """sha256 of a result's canonical JSON: the record proves what was stored without
    holding it (the row holds it, redacted or sealed)."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":"),
                                     default=str).encode()).hexdigest()


def intent_of(step: Step, *, undo: bool = False) -> dict:
    """The intent checkpointed in `step`'s row, with what its attempt ended with: the data
    of the one record of that attempt. `undo`: the attempt was its compensation."""
    began = step.attempt_started_at.isoformat() if step.attempt_started_at else None
    if undo:
        return {"key": step.compensation_key, "attempt": step.compensation_attempt,
                "started_at": began, "remote_ref": step.compensation_ref}
    intent = {"key": step.idempotency_key, "attempt": step.attempt, "started_at": began,
              "will_do": step.intended_action, "remote_ref": step.remote_ref}
    if step.status == StepStatus.SUCCEEDED:
        intent["result_sha256"] = result_digest(step.result)
    return intent


def intent_of_call(call, *, undo: bool = False) -> dict:
    """intent_of for an agent's tool call: the intent checkpointed in the ToolCall row.
    `undo`: the attempt was the call's undo."""
    began = call.attempt_started_at.isoformat() if call.attempt_started_at else None
    if undo:
        return {"key": call.compensation_key, "attempt": call.compensation_attempt,
                "started_at": began, "remote_ref": call.compensation_ref}
    intent = {"key": call.idempotency_key, "attempt": call.attempt, "started_at": began,
              "args_hash": call.args_hash, "remote_ref": call.remote_ref}
    if call.status == "succeeded":
        intent["result_sha256"] = result_digest(call.result)
    return intent
