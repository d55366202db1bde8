"""What the second person is told of each high-impact effect that stands or may stand
(operator_rules.high_impact_effects): an undo whose outcome is unknown (in flight when its
run was ended) may have been undone, and is never called failed."""

from runs.definitions import definition
from runs.machine.transitions.operator_rules import high_impact_effects
from runs.models import ErrorClass, Step, StepStatus


def _posting(status: str, error_class: str = "") -> Step:
    return Step(name="post-ledger", kind=definition.WRITE, impact=definition.HIGH,
                status=status, error_class=error_class)


def test_an_undo_in_doubt_may_have_been_undone_and_a_failed_one_stands():
    in_doubt, failed, done = (
        _posting(StepStatus.COMPENSATION_FAILED, ErrorClass.UNKNOWN),
        _posting(StepStatus.COMPENSATION_FAILED, ErrorClass.TRANSIENT),
        _posting(StepStatus.SUCCEEDED))
    assert [str(e) for e in high_impact_effects([in_doubt])] == [
        "post-ledger: undo outcome unknown: may have been undone"]
    assert [str(e) for e in high_impact_effects([failed])] == [
        "post-ledger: undo failed: still stands"]
    assert [str(e) for e in high_impact_effects([done])] == ["post-ledger: succeeded"]
    assert high_impact_effects([_posting(StepStatus.COMPENSATED)]) == []
