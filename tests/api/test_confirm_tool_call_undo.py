"""Over the API, a run paused before a high-impact tool call's undo offers the confirmation
on that call (its `actions`), and POST .../actions/confirm_compensation with the step and
the call confirms it as the token's person: the undo is then sent once. The invoice-triage
agent runs against the sandbox over real HTTP; the test counts the ledger's reversals."""

import pytest
from django.contrib.auth.models import Group, Permission, User

from api.tokens import token_create
from console.roles import ensure_roles
from runs.models import RunStatus, ToolCall
from tests.agent_runs import advance
from tests.runs.agents.test_high_impact_tool_call_undo import paused_at_the_posting, reversals

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def sandbox(live_sandbox):
    return live_sandbox


@pytest.fixture
def olga(db):
    ensure_roles(Group, Permission)
    user = User.objects.create_user("olga")
    user.groups.add(Group.objects.get(name="operators"))
    return user


def test_the_api_offers_and_confirms_the_paused_calls_undo(client, olga):
    _, plaintext = token_create(name="ops", workflows=["invoice-triage"], acting_user=olga)
    headers = {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}
    run = paused_at_the_posting("api-confirm")
    call = ToolCall.objects.get(step__run=run, tool="post-ledger")
    state = client.get(f"/api/runs/{run.pk}", **headers).json()
    assert "confirm_compensation" in [a["name"] for a in state["operator_actions"]]
    offered = {c["ref"]: c["actions"] for c in state["agent_steps"][0]["tool_calls"]}
    assert [ref for ref, names in offered.items() if "confirm_compensation" in names] == \
        [call.ref]
    url = f"/api/runs/{run.pk}/actions/confirm_compensation"
    wrong = client.post(url, {"reason": "checked", "step": "triage", "call": "9.9"},
                        content_type="application/json", **headers)
    assert wrong.status_code == 409 and reversals() == 0
    done = client.post(url, {"reason": "reversal checked", "step": "triage", "call": call.ref},
                       content_type="application/json", **headers)
    assert done.status_code == 200, done.content
    assert advance(run).status == RunStatus.COMPENSATED
    assert reversals() == 1
