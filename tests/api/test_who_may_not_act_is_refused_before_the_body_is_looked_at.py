"""A run action, a pause and a resume refuse a person who may not take them before their
body is looked at, whatever the body holds: a body the schema refuses (a NUL, a missing or
mistyped reason, a field the operation does not take) gets the same 403 as a well-formed
one, so that whoever may not act learns nothing from the schema's answer; and a run the
token may not see is as unknown (404) as one that does not exist. A person who may act
still has their body's faults named (422). Nothing is written on any refusal."""

import json

import pytest
from django.contrib.auth.models import Group, Permission, User

from api.tokens import token_create
from approvals.models import ApprovalRequest
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.machine import dispatch
from runs.models import DispatchPause, Run, RunStatus, Step, StepStatus
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db

BAD_BODIES = [
    {"reason": "INC\u00007", "step": "create-task"},
    {"step": "create-task"},
    {"reason": 7, "step": "create-task"},
    {"reason": "INC-7", "step": "create-task", "evidense": "the tracker"},
]


@pytest.fixture(autouse=True)
def _fresh_pauses():
    dispatch.forget_cache()
    yield
    dispatch.forget_cache()


@pytest.fixture
def people(db):
    ensure_roles(Group, Permission)
    olga = User.objects.create_user("olga")
    olga.groups.add(Group.objects.get(name="operators"))
    aude = User.objects.create_user("aude")
    aude.groups.add(Group.objects.get(name="auditors"))
    return {"olga": olga, "aude": aude}


def _bearer(person, name):
    _, plaintext = token_create(name=name, workflows=["test-orders"], acting_user=person)
    return {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}


def _post(client, headers, path, body):
    return client.post(path, json.dumps(body), content_type="application/json", **headers)


def _written():
    return (list(Run.objects.order_by("pk").values_list("status", "audit_seq")),
            list(Step.objects.order_by("pk").values_list("status", "attempt")),
            AuditRecord.objects.count(), ApprovalRequest.objects.count(),
            DispatchPause.objects.count())


def _failed_run(workflow="test-orders"):
    return place(new_run(workflow), status=RunStatus.ATTENTION,
                 step_statuses={"create-task": StepStatus.FAILED})


@pytest.mark.parametrize("body", BAD_BODIES)
def test_a_person_without_the_permission_is_403_whatever_the_body(client, people, body):
    run = _failed_run()
    before = _written()
    response = _post(client, _bearer(people["aude"], "aude"),
                     f"/api/runs/{run.pk}/actions/retry_step", body)
    assert response.status_code == 403, response.content
    assert response.json()["error"] == "forbidden"
    assert "errors" not in response.json()
    assert _written() == before


@pytest.mark.parametrize("body", BAD_BODIES)
def test_a_run_the_token_may_not_see_is_as_unknown_as_none_whatever_the_body(client,
                                                                             people, body):
    hidden = _failed_run("test-saga")
    before = _written()
    headers = _bearer(people["olga"], "olga")
    seen = _post(client, headers, f"/api/runs/{hidden.pk}/actions/retry_step", body)
    unknown = _post(client, headers, f"/api/runs/{hidden.pk + 1000}/actions/retry_step", body)
    assert seen.status_code == unknown.status_code == 404, seen.content
    assert seen.json()["error"] == unknown.json()["error"] == "run_not_found"
    assert seen.json().keys() == unknown.json().keys()
    assert _written() == before


@pytest.mark.parametrize("body", BAD_BODIES)
def test_a_person_who_may_act_still_has_the_body_refused_naming_the_field(client, people,
                                                                          body):
    run = _failed_run()
    before = _written()
    response = _post(client, _bearer(people["olga"], "olga"),
                     f"/api/runs/{run.pk}/actions/retry_step", body)
    assert response.status_code == 422, response.content
    assert response.json()["errors"][0]["loc"] in (["reason"], ["evidense"])
    assert _written() == before


@pytest.mark.parametrize("change", ["pause", "resume"])
@pytest.mark.parametrize("body", [{"reason": ""}, {"reason": "INC-4711", "sytem": "ledger"},
                                  {}])
def test_a_pause_or_resume_by_who_may_not_is_403_whatever_the_body(client, people, change,
                                                                   body):
    before = _written()
    response = _post(client, _bearer(people["aude"], "aude"),
                     f"/api/workflows/test-orders/dispatch/{change}", body)
    assert (response.status_code, response.json()["error"]) == (403, "forbidden"), \
        response.content
    refused = _post(client, _bearer(people["olga"], "olga"),
                    f"/api/workflows/test-orders/dispatch/{change}", body)
    assert refused.status_code == 422, refused.content
    assert _written() == before
