"""GET /api/runs/{id} marks each action the run offers with whether the token's acting
person may take it (`permitted`), by the rule the console and the CLI ask: an auditor's
token sees cancel and terminate listed as not permitted, and is indeed refused them with 403
without anything changing; a person granted one permission on the run's workflow only is
permitted exactly what the CLI's list of what the run offers says."""

import io
import json

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.core.management import call_command
from guardian.shortcuts import assign_perm

from api.tokens import token_create
from approvals.models import ApprovalRequest
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.models import Run, RunStatus, StepStatus
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


@pytest.fixture
def people(db):
    ensure_roles(Group, Permission)
    olga = User.objects.create_user("olga")
    olga.groups.add(Group.objects.get(name="operators"))
    aude = User.objects.create_user("aude")
    aude.groups.add(Group.objects.get(name="auditors"))
    # May retry steps of test-orders only (an object permission on its workflow row).
    rita = User.objects.create_user("rita")
    return {"olga": olga, "aude": aude, "rita": rita}


def _bearer(person=None):
    _, plaintext = token_create(name=f"t-{person or 'nobody'}", workflows=["test-orders"],
                                acting_user=person)
    return {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}


def _failed_run():
    return place(new_run(), status=RunStatus.ATTENTION,
                 step_statuses={"create-task": StepStatus.FAILED})


def _actions(client, run, headers) -> dict[str, bool]:
    response = client.get(f"/api/runs/{run.pk}", **headers)
    assert response.status_code == 200, response.content
    return {a["name"]: a["permitted"] for a in response.json()["operator_actions"]}


def _unchanged(run):
    return (Run.objects.values_list("status", "audit_seq").get(pk=run.pk),
            AuditRecord.objects.filter(run=run).count(),
            ApprovalRequest.objects.filter(run=run).count())


def test_an_auditors_token_sees_no_action_it_may_take_and_is_refused_each(client, people):
    run = _failed_run()
    headers = _bearer(people["aude"])
    actions = _actions(client, run, headers)
    assert {"cancel", "terminate"} <= set(actions)
    assert not any(actions.values()), actions
    before = _unchanged(run)
    for name in actions:
        refused = client.post(f"/api/runs/{run.pk}/actions/{name}", {"reason": "INC-7"},
                              content_type="application/json", **headers)
        assert refused.status_code == 403, (name, refused.content)
        assert refused.json()["error"] == "forbidden"
    assert _unchanged(run) == before


def test_an_operators_token_may_take_every_action_offered(client, people):
    run = _failed_run()
    actions = _actions(client, run, _bearer(people["olga"]))
    assert actions and all(actions.values()), actions


def test_a_token_that_acts_for_nobody_may_take_none(client, people):
    run = _failed_run()
    actions = _actions(client, run, _bearer())
    assert actions and not any(actions.values()), actions


def test_a_grant_on_the_runs_workflow_permits_what_the_cli_says_and_no_more(client, people):
    run = _failed_run()
    assign_perm("runs.retry_step", people["rita"], run.workflow)
    actions = _actions(client, run, _bearer(people["rita"]))
    out = io.StringIO()
    call_command("run_action", str(run.pk), "--user", "rita", "--json", stdout=out)
    cli = {row["action"]: row["permitted"] for row in json.loads(out.getvalue())}
    assert actions == {name: cli[name] for name in actions}
    assert actions["retry_step"] is True
    assert actions["terminate"] is False and actions["cancel"] is False
    # Not permitted on another workflow's run, though the same person and permission.
    saga = place(new_run("test-saga"), status=RunStatus.ATTENTION)
    _, plaintext = token_create(name="t-rita-saga", workflows=["test-saga"],
                                acting_user=people["rita"])
    elsewhere = _actions(client, saga, {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"})
    assert elsewhere and not any(elsewhere.values()), elsewhere


def test_the_openapi_document_describes_permitted(client):
    schemas = client.get("/api/openapi.json").json()["components"]["schemas"]
    action = schemas["OperatorAction"]
    assert "permitted" in action["required"]
    assert action["properties"]["permitted"]["type"] == "boolean"
    assert "403" in action["properties"]["permitted"]["description"]
