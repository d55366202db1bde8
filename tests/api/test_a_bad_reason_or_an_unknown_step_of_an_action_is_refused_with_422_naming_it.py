"""POST /api/runs/{id}/actions/{action} answers input it cannot act on as the schema answers
a field that does not match: 422 with `errors` naming the field. A reason no record may keep
(spaces only, or a right-to-left override that would make the audit trail read as other
text) names `reason`; a step the run does not have names `step` (not 409: the run's state
has nothing to do with it). A step that exists but whose state refuses the action stays 409,
a missing step 400, and a person who may not act is refused with 403 before their input is
looked at. Nothing is written on any refusal."""

import pytest
from django.contrib.auth.models import Group, Permission, User

from api.tokens import token_create
from approvals.models import ApprovalRequest
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.models import Run, RunStatus, Step, StepStatus
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db

OVERRIDE = "refund approved \u202edesrever\u202c"


@pytest.fixture
def people(db):
    ensure_roles(Group, Permission)
    olga = User.objects.create_user("olga")
    olga.groups.add(Group.objects.get(name="operators"))
    aude = User.objects.create_user("aude")
    aude.groups.add(Group.objects.get(name="auditors"))
    return {"olga": olga, "aude": aude}


def _bearer(person):
    _, plaintext = token_create(name=f"t-{person.username}", workflows=["test-orders"],
                                acting_user=person)
    return {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}


def _failed_run():
    return place(new_run(), status=RunStatus.ATTENTION,
                 step_statuses={"create-task": StepStatus.FAILED})


def _act(client, headers, run, action, **body):
    return client.post(f"/api/runs/{run.pk}/actions/{action}", body,
                       content_type="application/json", **headers)


def _written(run):
    """Everything an action or its four-eyes request would change."""
    return (Run.objects.values_list("status", "audit_seq", "status_message").get(pk=run.pk),
            list(Step.objects.filter(run=run).order_by("position")
                 .values_list("status", "attempt")),
            AuditRecord.objects.filter(run=run).count(),
            ApprovalRequest.objects.filter(run=run).count())


@pytest.mark.parametrize("reason", ["   ", OVERRIDE])
@pytest.mark.parametrize(("action", "body"), [
    ("resume", {}),
    ("retry_step", {"step": "create-task"}),
    ("terminate", {}),
])
def test_a_reason_no_record_may_keep_is_422_naming_reason(client, people, reason, action,
                                                          body):
    run = _failed_run()
    before = _written(run)
    response = _act(client, _bearer(people["olga"]), run, action, reason=reason, **body)
    assert response.status_code == 422, response.content
    answer = response.json()
    assert answer["error"] == "invalid_request"
    assert [e["loc"] for e in answer["errors"]] == [["reason"]]
    assert "reason" in answer["errors"][0]["msg"]
    assert _written(run) == before


@pytest.mark.parametrize(("action", "body"), [
    ("retry_step", {}),
    ("reconcile", {"mode": "ask"}),
    ("reconcile", {"mode": "not_found", "evidence": "checked the tracker"}),
])
def test_a_step_the_run_does_not_have_is_422_naming_step(client, people, action, body):
    run = _failed_run()
    before = _written(run)
    response = _act(client, _bearer(people["olga"]), run, action, step="create-tsak",
                    reason="INC-7", **body)
    assert response.status_code == 422, response.content
    answer = response.json()
    assert [e["loc"] for e in answer["errors"]] == [["step"]]
    assert "create-tsak" in answer["detail"]
    assert _written(run) == before


def test_a_step_the_run_has_but_whose_state_refuses_stays_409_and_none_stays_400(client,
                                                                                 people):
    run = _failed_run()
    before = _written(run)
    headers = _bearer(people["olga"])
    refused = _act(client, headers, run, "retry_step", step="fetch", reason="INC-7")
    assert refused.status_code == 409, refused.content
    assert "pending" in refused.json()["detail"]
    missing = _act(client, headers, run, "retry_step", reason="INC-7")
    assert missing.status_code == 400, missing.content
    assert _written(run) == before


def test_a_person_who_may_not_act_is_refused_before_their_input_is_looked_at(client,
                                                                              people):
    run = _failed_run()
    before = _written(run)
    headers = _bearer(people["aude"])
    for body in ({"reason": OVERRIDE}, {"reason": "INC-7", "step": "create-tsak"}):
        response = _act(client, headers, run, "retry_step", **{"step": "create-task", **body})
        assert response.status_code == 403, response.content
        assert response.json()["error"] == "forbidden"
    assert _written(run) == before
