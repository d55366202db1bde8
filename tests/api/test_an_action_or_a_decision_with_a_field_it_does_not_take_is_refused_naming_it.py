"""An operator action's body and an approval decision's take only their own fields: a
misspelt one ("steps", "coment") is refused with 422 naming it, never dropped, so that an
approval is not recorded without the comment its person wrote, nor an action refused or
taken without the step they named. Nothing is written."""

import uuid

import pytest
from django.contrib.auth.models import Group, Permission, User

from api.routes import api
from api.tokens import token_create
from approvals.models import ApprovalRequest, RequestStatus
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.models import Run, RunStatus, Step, StepStatus
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


@pytest.fixture
def people(db):
    ensure_roles(Group, Permission)
    olga = User.objects.create_user("olga")
    carl = User.objects.create_user("carl")
    for user in (olga, carl):
        user.groups.add(Group.objects.get(name="operators"))
    return {"olga": olga, "carl": carl}


def _bearer(person):
    _, plaintext = token_create(name=f"t-{person.username}", workflows=["test-orders"],
                                acting_user=person)
    return {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}


def _written(run):
    return (Run.objects.values_list("status", "audit_seq").get(pk=run.pk),
            list(Step.objects.filter(run=run).order_by("position")
                 .values_list("status", "attempt")),
            AuditRecord.objects.filter(run=run).count(),
            list(ApprovalRequest.objects.filter(run=run).values_list("status", flat=True)))


def test_an_action_with_a_misspelt_field_is_422_naming_it(client, people):
    run = place(new_run(), status=RunStatus.ATTENTION,
                step_statuses={"create-task": StepStatus.FAILED})
    before = _written(run)
    response = client.post(f"/api/runs/{run.pk}/actions/retry_step",
                           {"reason": "INC-7", "steps": "create-task"},
                           content_type="application/json", **_bearer(people["olga"]))
    assert response.status_code == 422, response.content
    assert [(e["loc"], e["type"]) for e in response.json()["errors"]] == [
        (["steps"], "extra_forbidden")]
    assert _written(run) == before


def test_a_decision_with_a_misspelt_comment_is_422_and_records_nothing(client, people):
    run = place(new_run(), status=RunStatus.ATTENTION,
                step_statuses={"create-task": StepStatus.SUCCEEDED,
                               "post-ledger": StepStatus.SUCCEEDED})
    asked = client.post(f"/api/runs/{run.pk}/actions/compensate", {"reason": "INC-7"},
                        content_type="application/json", **_bearer(people["olga"]))
    assert asked.status_code == 202, asked.content
    approval = asked.json()["approval_request"]["id"]
    before = _written(run)
    response = client.post(f"/api/approvals/{approval}/decision",
                           {"approve": True, "decision_id": str(uuid.uuid4()),
                            "coment": "checked the ledger with finance"},
                           content_type="application/json", **_bearer(people["carl"]))
    assert response.status_code == 422, response.content
    assert [e["loc"] for e in response.json()["errors"]] == [["coment"]]
    assert ApprovalRequest.objects.get(pk=approval).status == RequestStatus.PENDING
    assert _written(run) == before


@pytest.mark.parametrize("component", ["ActionIn", "DecisionIn"])
def test_the_document_says_the_bodies_take_no_other_field(component):
    schema = api.get_openapi_schema()["components"]["schemas"][component]
    assert schema["additionalProperties"] is False
