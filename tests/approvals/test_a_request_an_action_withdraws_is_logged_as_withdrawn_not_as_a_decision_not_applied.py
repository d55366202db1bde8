"""A pending request that an operator's action ends (a tool call cancelled, the run
terminated) is withdrawn at once, and the log says so once: that it was withdrawn and why.
It says nothing of a decision, since none was made: the warning that a decision was not
applied is for a request decided before its wait ended, and an on-call reader who meets it
looks for an approver's decision that went nowhere."""

import logging

import pytest
from django.contrib.auth.models import User

from approvals import requests
from approvals.models import ApprovalRequest
from approvals.operator_actions import act
from runs.machine import transitions
from runs.operator.actions import ActionInput
from tests.agent_runs import LARGE, advance, start_triage

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize(("action", "target"), [
    ("cancel_tool_call", True),
    ("terminate", False),
])
def test_a_withdrawn_request_is_not_said_to_have_a_decision_not_applied(
        live_sandbox, caplog, action, target):
    run = advance(start_triage(LARGE))
    (call,) = transitions.waiting_tool_calls(run)
    requests.open_pending_requests()
    request = ApprovalRequest.objects.get(tool_call_id=call.pk)
    given = ActionInput(reason="wrong cost centre", **(
        {"step": "triage", "call": call.ref} if target else {}))

    with caplog.at_level(logging.INFO, logger="approvals.withdrawal"):
        assert act(action, run.pk, user=User.objects.create_superuser("root"),
                   given=given).done

    request.refresh_from_db()
    assert request.status == "withdrawn" and request.apply_error == ""
    said = [r for r in caplog.records if r.name == "approvals.withdrawal"]
    assert [r.levelno for r in said] == [logging.INFO]
    assert said[0].getMessage().startswith(f"approval request {request.pk} withdrawn: ")
    assert not any("not applied" in r.getMessage() for r in caplog.records)
