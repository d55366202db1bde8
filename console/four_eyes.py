"""What a second person's approval of an operator's compensate or terminate sets off: the
same transition the operator would have called, recorded as theirs, with the approver in
the audit record."""

from approvals.operator_actions import register_operator_action
from runs import transitions


@register_operator_action("compensate")
def compensate(*, run_id, requested_by, approved_by, reason, params):
    transitions.compensate(run_id, actor=requested_by, reason=reason,
                           data={"approved_by": approved_by.label})


@register_operator_action("terminate")
def terminate(*, run_id, requested_by, approved_by, reason, params):
    transitions.terminate(run_id, actor=requested_by, reason=reason,
                          data={"approved_by": approved_by.label})
