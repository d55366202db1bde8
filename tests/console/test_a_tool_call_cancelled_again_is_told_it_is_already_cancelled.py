"""Cancelling a tool call a person has already cancelled is refused, and the refusal says
so: "tool call 3.0 (post-ledger) of triage is already cancelled". It said why the run's
state refused the action instead ("it is queued for a worker (queued); in that state only
Cancel or Terminate can be taken": the first cancel let the run go on), or, on a run left in
attention, that the step has no tool call that cancel applies to. The call's state is told first
(tool_call_rules.call_state_refusal, asked by operator_rules.named_target), the same at the
console, the API and the command line; nothing more is written."""

import pytest
from django.test import Client

from api.tokens import token_create
from approvals import requests
from approvals.operator_actions import act
from audit.models import AuditRecord
from runs.machine import transitions
from runs.models import RunStatus, ToolCall
from runs.operator.actions import ActionInput
from tests.agent_runs import LARGE, advance, start_triage
from tests.console.test_the_console_the_api_and_the_cli_answer_each_action_alike_in_each_state import (  # noqa: E501
    Doors,
    ask,
)
from tests.factories import place

pytestmark = pytest.mark.django_db(transaction=True)

DOORS = ("console", "api", "cli")


@pytest.fixture
def doors(operator):
    console = Client()
    console.force_login(operator)
    _, plaintext = token_create(name="ops", workflows=["invoice-triage"],
                                acting_user=operator)
    return Doors(operator, console, Client(HTTP_AUTHORIZATION=f"Bearer {plaintext}"))


def test_a_call_cancelled_again_is_said_to_be_cancelled_already(live_sandbox, doors,
                                                                 operator):
    run = advance(start_triage(LARGE))
    (call,) = transitions.waiting_tool_calls(run)
    requests.open_pending_requests()
    given = {"reason": "wrong cost centre", "step": "triage", "call": call.ref}
    act("cancel_tool_call", run.pk, user=operator, given=ActionInput(**given))
    run.refresh_from_db()
    # The run waited only for this call: it goes on without it.
    assert run.status == RunStatus.QUEUED

    answers = {door: ask(doors, door, run, "cancel_tool_call", {**given, "reason": "again"})
               for door in DOORS}
    assert answers["console"] == answers["api"] == answers["cli"], answers
    said = answers["api"]
    assert said.words == (f"tool call {call.ref} (post-ledger) of triage is already "
                          "cancelled; the run's history says by whom and why; no call of "
                          "triage can be cancelled now"), said
    assert said.outcome == "refused" and said.records == [] and said.requests == []
    assert said.status == RunStatus.QUEUED
    response = doors.api.post(f"/api/runs/{run.pk}/actions/cancel_tool_call",
                              {**given, "reason": "again"}, content_type="application/json")
    assert response.status_code == 409 and response.json()["error"] == "refused"
    # Cancelled once, by the first person, as recorded.
    (record,) = AuditRecord.objects.filter(run=run, action="tool_call_cancelled")
    assert record.reason == "wrong cost centre" and record.actor_label == operator.username
    assert ToolCall.objects.get(pk=call.pk).status == "cancelled"


def test_on_a_run_left_in_attention_too(live_sandbox, doors, operator):
    run = advance(start_triage(LARGE))
    (call,) = transitions.waiting_tool_calls(run)
    run = place(run, status=RunStatus.ATTENTION)
    given = {"reason": "wrong cost centre", "step": "triage", "call": call.ref}
    act("cancel_tool_call", run.pk, user=operator, given=ActionInput(**given))
    answers = {door: ask(doors, door, run, "cancel_tool_call", given) for door in DOORS}
    assert answers["console"] == answers["api"] == answers["cli"], answers
    assert answers["api"].words.endswith("of triage is already cancelled; the run's history "
                                         "says by whom and why; no call of triage can be "
                                         "cancelled now"), answers["api"]
    assert answers["api"].outcome == "refused" and answers["api"].records == []
    assert AuditRecord.objects.filter(run=run, action="tool_call_cancelled").count() == 1
