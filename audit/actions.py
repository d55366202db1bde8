"""The actions of the audit log, named once: the transitions write them, the metrics count
them, the console filters by them and the tests look for them. A StrEnum, so a value is the
plain string stored in AuditRecord.action (and hashed into the chain)."""

from enum import StrEnum


class AuditAction(StrEnum):
    # a run's life
    STARTED = "started"
    CLAIMED = "claimed"
    COMPLETED = "completed"
    DEFINITION_MISSING = "definition_missing"
    INPUT_REJECTED = "input_rejected"
    # the approval a run waits on cannot be asked for (approvals.requests): held for a person
    APPROVAL_UNASKABLE = "approval_unaskable"
    # the workflow's dispatch is paused: the run's next step waits (runs.machine.dispatch)
    DISPATCH_HELD = "dispatch_held"
    # durable timers: a run sleeps until a time, the sweeper (or a person, early) wakes it
    TIMER_STARTED = "timer_started"
    TIMER_FIRED = "timer_fired"
    TIMER_WOKEN = "timer_woken"
    # external events: a run waits for one, receives it (or a person delivers or skips it),
    # or its timeout passes; an event kept for it that its version's schema refuses is said
    # on it (evidence, the run waits on)
    EVENT_AWAITED = "event_awaited"
    EVENT_RECEIVED = "event_received"
    EVENT_SKIPPED = "event_skipped"
    EVENT_TIMED_OUT = "event_timed_out"
    EVENT_REFUSED = "event_refused"
    LEASE_EXPIRED = "lease_expired"
    STEP_LEASE_EXPIRED = "step_lease_expired"
    # a step's outcome (intent records are no longer written: the intent is the step's row
    # and the outcome's record carries it; the name stays for the chains that hold some)
    INTENT = "intent"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    OUTCOME_UNKNOWN = "outcome_unknown"
    RETRY_SCHEDULED = "retry_scheduled"
    MODEL_OUTPUT_REJECTED = "model_output_rejected"
    ATTENTION = "attention"
    LATE_RESULT = "late_result"
    LATE_RESULT_RECORDED = "late_result_recorded"
    # unknown outcomes settled
    RECONCILED = "reconciled"
    RECONCILE_SCHEDULED = "reconcile_scheduled"
    LOOKUP_RETRY_SCHEDULED = "lookup_retry_scheduled"
    # compensation
    COMPENSATION_STARTED = "compensation_started"
    COMPENSATION_INTENT = "compensation_intent"
    COMPENSATION_SUCCEEDED = "compensation_succeeded"
    COMPENSATION_RETRY_SCHEDULED = "compensation_retry_scheduled"
    COMPENSATION_FAILED = "compensation_failed"
    COMPENSATION_PAUSED = "compensation_paused"
    COMPENSATION_CONFIRMED = "compensation_confirmed"
    COMPENSATED = "compensated"
    # approvals (the request's lifecycle is evidence on the run's chain)
    APPROVAL_REQUESTED = "approval_requested"
    APPROVAL_OPENED = "approval_opened"
    APPROVAL_REMINDED = "approval_reminded"
    APPROVAL_ESCALATED = "approval_escalated"
    APPROVAL_SUPERSEDED = "approval_superseded"
    APPROVAL_WITHDRAWN = "approval_withdrawn"
    APPROVAL_DECIDED = "approval_decided"
    APPROVAL_TIMED_OUT = "approval_timed_out"
    # an approval step whose approve_if said no person is needed: the workflow's rule
    # approved it, nobody was asked (runs.machine.transitions.approval_rules)
    APPROVED_BY_RULE = "approved_by_rule"
    # agent steps: each model turn, and each tool call it asks for (the call's outcome,
    # reconciliation, retries and attention use the step actions above, with the call named
    # in the record's data as "tool_call": "<turn>.<index>")
    AGENT_TURN_STORED = "agent_turn_stored"
    TOOL_CALL_INVALID = "tool_call_invalid"
    TOOL_CALL_INTENT = "tool_call_intent"
    TOOL_CALL_SUCCEEDED = "tool_call_succeeded"
    TOOL_CALL_APPROVAL_REQUESTED = "tool_call_approval_requested"
    TOOL_CALL_APPROVAL_DECIDED = "tool_call_approval_decided"
    TOOL_CALL_COMPENSATION_INTENT = "tool_call_compensation_intent"
    TOOL_CALL_COMPENSATED = "tool_call_compensated"
    TOOL_CALL_CANCELLED = "tool_call_cancelled"
    # operator actions
    RESUMED = "resumed"
    STEP_RETRIED = "step_retried"
    DECISION_DISCARDED = "decision_discarded"
    CANCEL_REQUESTED = "cancel_requested"
    CANCELLED = "cancelled"
    TERMINATED = "terminated"
    REOPENED = "reopened"
    RERUN_FROM_STEP = "rerun_from_step"
    # maintenance: the run's sensitive values sealed again with the field key that seals now
    # (runs.operator.field_keys), with the new digests of the results that changed
    FIELDS_RESEALED = "fields_resealed"


# The records every run and step writes on its way through (a ten-step run: 22 of its 23):
# nearly all of the log. audit_uncommon_action_idx leaves them out; a search for one of them
# walks the log newest first and meets one at once.
ROUTINE_ACTIONS = (
    AuditAction.STARTED, AuditAction.CLAIMED, AuditAction.INTENT, AuditAction.SUCCEEDED,
    AuditAction.COMPLETED, AuditAction.AGENT_TURN_STORED, AuditAction.TOOL_CALL_INTENT,
    AuditAction.TOOL_CALL_SUCCEEDED,
)


# The records of a step's outcome: each is a progress event for subscribers
# (api.webhook_cursors reads them from the chain; the runtime writes nothing else for them).
STEP_OUTCOMES = (
    AuditAction.SUCCEEDED, AuditAction.RECONCILED, AuditAction.FAILED,
    AuditAction.OUTCOME_UNKNOWN, AuditAction.RETRY_SCHEDULED,
    AuditAction.COMPENSATION_SUCCEEDED, AuditAction.COMPENSATION_FAILED,
    AuditAction.APPROVAL_DECIDED, AuditAction.APPROVED_BY_RULE,
)
