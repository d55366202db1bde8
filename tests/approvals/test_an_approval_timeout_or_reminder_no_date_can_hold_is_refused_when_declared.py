"""An approval's request is due `timeout` after it opens and reminded `remind_every` after.
One that ends past the year 9999 (timedelta.max, written for "never time out" or "never
remind") was accepted when declared; the request then never opened: each sweep failed on
it with OverflowError, and the run was at last held for a person with "date value out of
range", naming neither the step nor the option. Now the declaration fails when its module
is imported, naming the workflow, the step (or the tool approval) and the option, and
declares nothing; a far but computable timeout still opens its request."""

from datetime import timedelta

import pytest
from django.utils import timezone

from approvals.models import ApprovalRequest, RequestStatus
from approvals.requests import open_pending_requests
from runs.definitions.definition import Workflow, registry, tool_approval
from runs.definitions.validation import DefinitionError
from runs.execution import executor
from runs.models import RunStatus
from tests.factories import new_run
from tests.workflows import OrderIn


def snapshot(ctx):
    return {"order": ctx.input.order}


def unregistered():
    return Workflow("test-far-approval", version=1, input=OrderIn, register=False)


@pytest.mark.parametrize("option", ["timeout", "remind_every"])
@pytest.mark.parametrize("value", [timedelta.max, timedelta(days=3_000_000)])
def test_a_step_whose_request_no_date_can_hold_is_refused_naming_the_option(option, value):
    workflow = unregistered()
    with pytest.raises(DefinitionError) as refused:
        workflow.approval("sign-off", approvers=("group:finance",), on_timeout="reject",
                          **{option: value})(snapshot)
    assert str(refused.value) == (
        f"workflow test-far-approval v1, step 'sign-off': {option} {value} ends past the "
        "year 9999 counted from now, which no date holds; declare a shorter one")
    assert workflow.steps == []


def test_a_tool_approval_whose_request_no_date_can_hold_is_refused_naming_the_option():
    with pytest.raises(DefinitionError, match=r"^tool approval: timeout .* ends past the year "
                                              "9999 counted from now"):
        tool_approval(approvers=("group:finance",), timeout=timedelta.max)


@pytest.mark.django_db
def test_a_far_but_computable_timeout_opens_its_request():
    workflow = Workflow("test-far-approval", version=1, input=OrderIn)
    try:
        workflow.approval("sign-off", approvers=("group:finance",), on_timeout="reject",
                          timeout=timedelta(days=365 * 5000))(snapshot)
        run = new_run("test-far-approval")
        assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
        assert open_pending_requests(now=timezone.now()) == 1
        request = ApprovalRequest.objects.get(run=run)
        assert request.due_at.year > 6000 and request.status == RequestStatus.PENDING
    finally:
        registry.unregister(workflow)
