"""The stop verdict, enforced: a step or agent tool whose recovery contract cannot be written
(a high-impact effect with no lookup by key and a receiver that ignores keys, see
runs.definitions.contracts.effect_verdict) never runs unattended. Before each of its attempts
(the first, a retry after a transient error, a resend an operator asked for) the run waits
for a person, through the approval steps' own wait: step `waiting`, an ApprovalWait row, and
the approvals app's request, notifications and pages. The approval allows that attempt and
no other: the attempt after it asks again.

The wait and a person's decision are the effect machine's, for steps and tool calls alike
(effects.held_for_approval, effects.decided_by_person); the adapters (effect_rows.StepEffect,
CallEffect) ask is_gated, and record and spend the approval."""

from ...definitions import definition
from ...definitions.contracts import effect_verdict

# The run's status message while a step waits.
WAIT_MESSAGE = "{step} waits for a person before attempt {attempt}: {reason}"


def is_gated(spec: definition.StepDef | definition.ToolSpec) -> bool:
    """Whether each attempt of `spec` waits for a person's approval."""
    return effect_verdict(spec) is not None
