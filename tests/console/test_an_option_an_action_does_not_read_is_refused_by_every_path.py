"""An option the action does not read (a reconcile's, in its mode) is refused, naming it,
never dropped: by the one function every caller acts through, so the API (422), the
console and a bulk job over the API refuse it as the CLI does, before anything is asked of
another system or written. A remote reference has one limit, the database column's, in
every caller and in the API's document."""

import pytest
from django.urls import reverse

from api.tokens import token_create
from approvals.models import BulkJob
from approvals.operator_actions import ActionForbidden, act
from audit.models import AuditRecord
from runs.agent_models import ToolCall
from runs.models import Run, Step, StepStatus
from runs.operator.actions import ACTIONS, ActionInput

pytestmark = pytest.mark.django_db

COLUMN = Step._meta.get_field("remote_ref").max_length


@pytest.fixture
def bearer(operator):
    _, plaintext = token_create(name="erp", workflows=["test-orders"], acting_user=operator)
    return {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}


def _act(client, bearer, run, action, **body):
    return client.post(f"/api/runs/{run.pk}/actions/{action}", body,
                       content_type="application/json", **bearer)


def _state(run) -> tuple:
    return (Run.objects.get(pk=run.pk).status,
            list(AuditRecord.objects.filter(run=run).values_list("seq", flat=True)),
            Step.objects.get(run=run, name="create-task").status)


@pytest.mark.parametrize("action, body, named, where", [
    ("reconcile", {"mode": "ask", "evidence": "seen in the tracker", "remote_ref": "T-9"},
     ["remote_ref", "evidence"], "reconcile in mode ask"),
    ("reconcile", {"mode": "not_found", "evidence": "searched", "remote_ref": "T-9"},
     ["remote_ref"], "reconcile in mode not_found"),
    ("resume", {"mode": "found", "evidence": "seen"}, ["mode", "evidence"], "resume"),
])
def test_the_api_answers_422_naming_each_option_and_does_nothing(
        client, bearer, stuck_run, script, action, body, named, where):
    before = _state(stuck_run)
    response = _act(client, bearer, stuck_run, action, reason="checked the tracker",
                    step="create-task" if action == "reconcile" else "", **body)
    assert response.status_code == 422, response.content
    answer = response.json()
    assert answer["error"] == "invalid_request"
    assert answer["detail"].startswith(f"{', '.join(named)} do")
    assert f"not apply with {where}" in answer["detail"]
    assert [e["loc"] for e in answer["errors"]] == [[name] for name in named]
    assert script.reconcile_calls == []  # the remote system was not asked
    assert _state(stuck_run) == before


def test_the_console_refuses_evidence_given_while_asking_by_key(client_for, operator,
                                                                stuck_run, script):
    before = _state(stuck_run)
    page = client_for(operator).post(
        reverse("console:action", args=[stuck_run.pk, "reconcile"]),
        {"reason": "checked", "step": "create-task", "mode": "ask", "remote_ref": "",
         "evidence": "seen in the tracker", "seen": str(stuck_run.audit_seq)}, follow=True)
    assert ("Reconcile was not done: evidence does not apply with reconcile in mode ask"
            in page.content.decode())
    assert script.reconcile_calls == []
    assert _state(stuck_run) == before


def test_a_bulk_job_over_the_api_refuses_a_step_its_action_does_not_read(client, bearer,
                                                                         stuck_run):
    before = _state(stuck_run)
    response = client.post("/api/bulk", {"action": "terminate", "reason": "vendor incident",
                                         "step": "create-task",
                                         "filters": {"status": "attention"}},
                           content_type="application/json", **bearer)
    assert response.status_code == 422, response.content
    assert [e["loc"] for e in response.json()["errors"]] == [["step"]]
    assert not BulkJob.objects.exists()
    assert _state(stuck_run) == before


def test_a_remote_reference_has_the_columns_limit_in_the_api_and_its_document(
        client, bearer, stuck_run):
    assert ToolCall._meta.get_field("remote_ref").max_length == COLUMN
    document = client.get("/api/openapi.json").json()
    assert (document["components"]["schemas"]["ActionIn"]["properties"]["remote_ref"]
            ["maxLength"]) == COLUMN
    before = _state(stuck_run)
    longer = _act(client, bearer, stuck_run, "reconcile", reason="found it",
                  step="create-task", mode="found", evidence="in the tracker",
                  remote_ref="T" * (COLUMN + 1))
    assert longer.status_code == 422
    assert [e["loc"] for e in longer.json()["errors"]] == [["remote_ref"]]
    assert _state(stuck_run) == before

    whole = _act(client, bearer, stuck_run, "reconcile", reason="found it",
                 step="create-task", mode="found", evidence="in the tracker",
                 remote_ref="T" * COLUMN)
    assert whole.status_code == 200, whole.content
    step = Step.objects.get(run=stuck_run, name="create-task")
    assert (step.status, step.remote_ref) == (StepStatus.SUCCEEDED, "T" * COLUMN)


@pytest.mark.parametrize("action", ["reconcile", "resume"])
def test_a_person_who_may_not_act_is_refused_for_that_before_the_input_is_read(
        auditor, stuck_run, script, caplog, action):
    # Options the action would not read (evidence while asking by key, a mode for a
    # resume), from someone without the permission: the answer is the permission's, logged,
    # never a word about the input.
    spec = ACTIONS[action]
    before = _state(stuck_run)
    with pytest.raises(ActionForbidden, match=f"may not {spec.label.lower()}"):
        act(action, stuck_run.pk, user=auditor,
            given=ActionInput(reason="checked", step="create-task", mode="ask",
                              evidence="seen in the tracker", remote_ref="T-9"))
    assert f"no {spec.permission} permission" in caplog.text
    assert script.reconcile_calls == []
    assert _state(stuck_run) == before
