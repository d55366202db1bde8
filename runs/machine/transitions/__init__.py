"""Every change of a run's or a step's state, and nothing else.

Each public function here is one transition: in one durable transaction it locks the run
row, checks the move against RUN_TRANSITIONS, writes the change and its audit records, and
commits. Broker messages are sent after commit and are only wake-up hints. The executor (for
automation) and the console (for operators) call these same functions.

The package, by concern: kernel (the table, Change, locking, audit), start (starting a
run), lease_cycle (claim, outcomes), leases (heartbeats, lease expiry), unknown_outcome (settling
an unknown outcome by a lookup), resends
(the one path that sends a step again), compensation, operator_rules (when an operator
action can succeed, who must agree), operator_words (an action's label and a state in words,
as a person is told them), operator (the operator actions and their skeleton: reason, lock,
refusal, four eyes), approval_waits,
agent_calls (an agent step's tool calls), agent_turns (its model turns), agent_compensation
(the undo of its calls), agent_operator (a person's actions on one call), rerun and
rerun_rules (re-run from a chosen step as a new generation).
"""

from .agent_calls import waiting_tool_calls
from .agent_operator import (
    begin_tool_call_undo,
    cancel_tool_call,
    decide_tool_call,
    reconcile_tool_call,
    record_tool_call_undo,
    retry_tool_call,
)
from .approval_rules import record_approval_words, rule_approval_words
from .approval_waits import (
    approval_timed_out,
    approval_unaskable,
    decide_approval,
    record_approval_event,
)
from .compensation import compensation_plan
from .events import (
    AWAITING,
    KEY_DIGEST,
    REF_LENGTH,
    DuplicateEvent,
    awaited,
    awaiting_ref,
    deadline_passed,
    declared_wait,
    deliver_event,
    deliver_event_by_hand,
    hold_renamed_wait,
    renamed_wait,
    shortest_digested_key,
    skip_event,
    waiting_event_step,
)
from .kernel import (
    DONE_STEP_STATUSES,
    HELD,
    NEW,
    RUN_TRANSITIONS,
    Lease,
    Outcome,
    allowed,
    input_hash,
    within_caller_transaction,
)
from .lease_cycle import claim_run, record_outcome
from .leases import (
    expire_lease,
    expire_leases,
    hand_back,
    heartbeat,
    heartbeat_many,
    lease_held_by,
)
from .operator import (
    applying_decision,
    ask_again,
    cancel,
    compensate,
    confirm_compensation,
    reconcile,
    reopen,
    resume,
    retry_step,
    terminate,
)
from .operator_rules import (
    EFFECT_KINDS,
    SECOND_PERSON_ACTIONS,
    STEP_ACTIONS,
    awaited_approval,
    eligible_steps,
    high_impact_effects,
    needs_second_person,
    paused_undo,
    refusal,
    step_refusal,
    unsettled_effects,
)
from .operator_words import LABELS, not_done
from .outcome import INVALID_OUTPUT_MAX, REMOTE_REF_MAX
from .rerun import rerun_from_step
from .rerun_rules import rerun_range, standing_effects
from .start import admitted_input, start_run
from .timers import sleeping_step, wake_timer
from .tool_call_rules import CALL_OPTIONAL_ACTIONS, TOOL_CALL_ACTIONS, call_refusal
from .unknown_outcome import settle_unknown

__all__ = [
    "DONE_STEP_STATUSES", "EFFECT_KINDS", "HELD", "NEW", "RUN_TRANSITIONS",
    "SECOND_PERSON_ACTIONS", "STEP_ACTIONS", "Lease", "Outcome", "allowed", "REMOTE_REF_MAX",
    "INVALID_OUTPUT_MAX",
    "approval_timed_out", "awaited_approval", "approval_unaskable", "rule_approval_words",
    "record_approval_words",
    "ask_again", "decide_tool_call",
    "reconcile_tool_call",
    "waiting_tool_calls", "TOOL_CALL_ACTIONS", "CALL_OPTIONAL_ACTIONS",
    "begin_tool_call_undo", "call_refusal",
    "record_tool_call_undo", "retry_tool_call", "cancel_tool_call", "cancel", "claim_run",
    "compensate",
    "compensation_plan", "confirm_compensation", "decide_approval", "eligible_steps",
    "expire_lease", "expire_leases", "hand_back", "heartbeat", "heartbeat_many",
    "lease_held_by",
    "high_impact_effects",
    "input_hash",
    "needs_second_person",
    "paused_undo", "reconcile", "record_approval_event", "record_outcome", "refusal",
    "reopen", "resume", "retry_step",
    "settle_unknown", "sleeping_step", "admitted_input", "start_run",
    "step_refusal",
    "terminate", "wake_timer",
    "DuplicateEvent", "awaited", "awaiting_ref", "deadline_passed", "declared_wait",
    "deliver_event",
    "deliver_event_by_hand",
    "skip_event",
    "shortest_digested_key", "hold_renamed_wait", "renamed_wait", "AWAITING", "KEY_DIGEST",
    "REF_LENGTH",
    "waiting_event_step", "unsettled_effects", "within_caller_transaction",
    "rerun_from_step", "rerun_range", "standing_effects", "applying_decision",
    "LABELS",
    "not_done",
]
