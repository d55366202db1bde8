"""An approval step's rule (approve_if) is asked once, by the change that reaches the step,
whatever it answers. The worker that records the step before it first tries that change in
one statement, and leaves it to the locking path when the run then waits for a person: the
rule's answer goes with it, and is not asked for again. A rule asked twice logs each of its
failures twice, and a rule whose answers differ (it reads a clock, a counter, a service)
would get a second chance to let through a step its first answer gave to a person."""

import pytest

from approvals import requests
from approvals.models import ApprovalRequest
from audit.models import AuditRecord
from runs.definitions import definition
from runs.definitions.definition import Workflow
from runs.execution import executor
from runs.models import RunStatus, StepStatus
from tests.factories import new_run, step
from tests.workflows import FAST, OrderIn

pytestmark = pytest.mark.django_db


def _rule_answering(answer, asked: list):
    def rule(snapshot):
        asked.append(snapshot["amount"])
        if isinstance(answer, Exception):
            raise answer
        return answer
    return rule


@pytest.fixture
def declared():
    """Declares a workflow whose approval step, reached after a read, has `rule`; a plain
    approval step follows it, so that a run its rule lets through waits there for a person
    (the change that reaches the ruled step then goes to the locking path as well)."""
    made = []

    def declare(name: str, rule) -> Workflow:
        workflow = Workflow(name, version=1, input=OrderIn)
        workflow.read("prepare", retry=FAST)(lambda ctx: {"order": ctx.input.order})
        workflow.approval("approve", approvers=("group:approvers",), on_timeout="reject",
                          approve_if=rule)(lambda ctx: {"amount": ctx.input.amount})
        workflow.approval("confirm", approvers=("group:approvers",),
                          on_timeout="reject")(lambda ctx: {"order": ctx.input.order})
        workflow.write("pay", retry=FAST, honours_key=True)(lambda ctx: {"ref": ctx.key})
        made.append(workflow)
        return workflow

    yield declare
    for workflow in made:
        definition.registry.unregister(workflow)


ANSWERS = {
    "True": (True, "approve"),
    "None": (None, "approve"),
    "raising": (KeyError("total"), "approve"),
    "False": (False, "confirm"),
}


@pytest.mark.parametrize("answer", list(ANSWERS))
def test_the_rule_is_asked_once_when_the_run_reaches_its_step(declared, approvers, t0,
                                                               caplog, answer):
    given, waits_at = ANSWERS[answer]
    asked = []
    declared("test-approval-rule-asked-once", _rule_answering(given, asked))
    run = new_run("test-approval-rule-asked-once", amount=5)

    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING

    assert asked == [5]
    assert step(run, waits_at).status == StepStatus.WAITING
    by_rule = AuditRecord.objects.filter(run=run, action="approved_by_rule").count()
    assert by_rule == (1 if given is False else 0)
    if isinstance(given, Exception):
        assert len([r for r in caplog.records
                    if "approve_if raised; a person decides" in r.getMessage()]) == 1
    # The approvals sweep asks a person for what waits, and asks nothing of the rule.
    assert requests.open_pending_requests(now=t0) == 1
    assert ApprovalRequest.objects.get(run=run).target_step == waits_at
    assert asked == [5]


def test_a_rule_that_answers_otherwise_when_asked_again_leaves_the_step_to_a_person(
        declared, approvers, t0):
    """Asked first, it asks for a person; asked again it would let the step through."""
    answers = [True, False]
    asked = []

    def rule(snapshot):
        asked.append(snapshot["amount"])
        return answers.pop(0)

    declared("test-approval-rule-changes-its-mind", rule)
    run = new_run("test-approval-rule-changes-its-mind", amount=5)

    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING

    assert asked == [5]
    assert step(run, "approve").status == StepStatus.WAITING
    assert not AuditRecord.objects.filter(run=run, action="approved_by_rule").exists()
    assert step(run, "confirm").status == StepStatus.PENDING
    assert requests.open_pending_requests(now=t0) == 1
    assert ApprovalRequest.objects.get(run=run).target_step == "approve"
