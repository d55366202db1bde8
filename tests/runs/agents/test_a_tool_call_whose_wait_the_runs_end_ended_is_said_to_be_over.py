"""A tool call that waited for a person's approval when a person ended its run (cancelled,
terminated, compensated) keeps its status `waiting`, as a step's wait does (kernel.end_waits);
its approval request is withdrawn. So the run page and the API's run state say of the call,
as they say of such a step, that its wait ended with the run and how the run was ended:
an integrator reading `state: waiting` on a call of a compensated run would wait for a
decision that no one can make. A call whose wait is live is not said to be over."""

import itertools
import re

import pytest
from django.contrib.auth.models import User

from api.tokens import token_create
from approvals import requests, schedule
from approvals.models import ApprovalRequest
from runs.machine import transitions
from runs.models import RunStatus, ToolCallStatus
from tests.agent_runs import ACTOR, LARGE, advance, start_triage

pytestmark = pytest.mark.django_db(transaction=True)
_tokens = itertools.count(1)


def _calls(client, run) -> dict:
    _, plaintext = token_create(name=f"reader-{next(_tokens)}", workflows=[run.workflow_name])
    response = client.get(f"/api/runs/{run.pk}", HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    assert response.status_code == 200, response.content
    (agent,) = response.json()["agent_steps"]
    return {c["ref"]: c for c in agent["tool_calls"]}


def _call_row(client, run, ref: str) -> str:
    boss = User.objects.filter(username="boss").first() or User.objects.create_superuser("boss")
    client.force_login(boss)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    rows = [row for row in re.findall(r"<tr>.*?</tr>", page, flags=re.S)
            if f'<td class="mono">{ref}</td>' in row]
    assert len(rows) == 1
    return rows[0]


def _waiting_for_approval():
    run = advance(start_triage(LARGE))
    assert run.status == RunStatus.WAITING
    (call,) = transitions.waiting_tool_calls(run)
    requests.open_pending_requests()
    return run, call


def test_a_live_wait_for_approval_is_not_said_to_be_over(live_sandbox, client):
    run, call = _waiting_for_approval()
    calls = _calls(client, run)
    assert calls[call.ref]["state"] == "waiting" and calls[call.ref]["wait_ended"] is None
    assert calls["0.0"]["wait_ended"] is None
    assert "the wait ended" not in _call_row(client, run, call.ref)


@pytest.mark.parametrize(("end", "said"), [
    (transitions.terminate, "it was terminated"),
    (transitions.cancel, "it was cancelled"),
])
def test_a_call_waiting_when_its_run_was_ended_says_its_wait_ended(live_sandbox, client,
                                                                    end, said):
    run, call = _waiting_for_approval()
    end(run.pk, actor=ACTOR, reason="wrong vendor")
    call.refresh_from_db()
    assert call.status == ToolCallStatus.WAITING  # the row keeps its wait
    calls = _calls(client, run)
    assert calls[call.ref]["state"] == "waiting"
    assert calls[call.ref]["wait_ended"] == f"the wait ended with the run: {said}"
    assert calls["0.0"]["wait_ended"] is None  # a call that ran waited for nothing
    assert f"the wait ended with the run: {said}" in _call_row(client, run, call.ref)


def test_a_call_waiting_when_its_run_was_compensated_says_its_wait_ended(live_sandbox,
                                                                          client):
    run, call = _waiting_for_approval()
    transitions.compensate(run.pk, actor=ACTOR, reason="wrong vendor")
    run = advance(run)
    assert run.status == RunStatus.COMPENSATED
    schedule.withdraw_stale_requests()
    assert ApprovalRequest.objects.get(tool_call_id=call.pk).status == "withdrawn"
    calls = _calls(client, run)
    assert calls[call.ref]["state"] == "waiting"
    assert calls[call.ref]["wait_ended"] == "the wait ended with the run: it was compensated"
    assert "the wait ended with the run: it was compensated" in _call_row(client, run,
                                                                          call.ref)
