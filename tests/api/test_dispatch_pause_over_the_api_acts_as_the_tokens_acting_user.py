"""Pausing and resuming a workflow's dispatch over the API is an action like a run's: the
token acts for the person an admin named on it (its acting user), with that person's
permission, never its maker's. A token that acts for nobody, or for a person who may not
pause the workflow, is refused with the codes a run action answers (403 `no_acting_user`,
403 `forbidden`), and nothing changes: no pause appears, none is lifted, nothing is
recorded. What is done is recorded as that person's."""

import pytest
from django.contrib.auth.models import Group, Permission, User
from guardian.shortcuts import assign_perm

from api.tokens import token_create
from console.roles import ensure_roles
from runs.machine import dispatch
from runs.models import ControlRecord, DispatchPause, RunStatus, StepStatus, Workflow
from tests.factories import SYSTEM, new_run, place

pytestmark = pytest.mark.django_db

URL = "/api/workflows/{}/dispatch/{}"


@pytest.fixture(autouse=True)
def _fresh_pauses():
    dispatch.forget_cache()
    yield
    dispatch.forget_cache()


@pytest.fixture
def people(db):
    ensure_roles(Group, Permission)
    boss = User.objects.create_superuser("boss")
    olga = User.objects.create_user("olga")
    olga.groups.add(Group.objects.get(name="operators"))
    aude = User.objects.create_user("aude")
    aude.groups.add(Group.objects.get(name="auditors"))
    return {"boss": boss, "olga": olga, "aude": aude}


def _bearer(name, *, made_by=None, acting_for=None,
            workflows=("test-orders", "test-two-systems")):
    _, plaintext = token_create(name=name, workflows=list(workflows), created_by=made_by,
                                acting_user=acting_for)
    return {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}


def _post(client, headers, workflow, change, reason="INC-4711 vendor outage"):
    return client.post(URL.format(workflow, change), {"reason": reason},
                       content_type="application/json", **headers)


def _pause_rows():
    return list(DispatchPause.objects.values_list("workflow_name", "system", "reason",
                                                  "paused_by", "paused_at"))


def test_a_view_only_acting_user_is_refused_even_when_the_tokens_maker_may(client, people):
    headers = _bearer("auditor-token", made_by=people["boss"], acting_for=people["aude"])
    response = _post(client, headers, "test-orders", "pause")
    assert response.status_code == 403
    assert response.json()["error"] == "forbidden"
    assert "aude" in response.json()["detail"]
    assert not DispatchPause.objects.exists() and not ControlRecord.objects.exists()

    # The same code a run action answers the same token.
    run = place(new_run(), status=RunStatus.ATTENTION,
                step_statuses={"create-task": StepStatus.FAILED})
    action = client.post(f"/api/runs/{run.pk}/actions/terminate", {"reason": "x"},
                         content_type="application/json", **headers)
    assert (action.status_code, action.json()["error"]) == (403, "forbidden")


def test_a_token_that_acts_for_nobody_neither_pauses_nor_resumes(client, people):
    headers = _bearer("no-person", made_by=people["boss"])
    response = _post(client, headers, "test-orders", "pause")
    assert (response.status_code, response.json()["error"]) == (403, "no_acting_user")
    assert not DispatchPause.objects.exists()

    dispatch.pause_dispatch(workflow="test-orders", actor=SYSTEM, reason="INC-1")
    before = _pause_rows()
    records = ControlRecord.objects.count()
    response = _post(client, headers, "test-orders", "resume", reason="all good")
    assert (response.status_code, response.json()["error"]) == (403, "no_acting_user")
    assert _pause_rows() == before
    assert ControlRecord.objects.count() == records


def test_an_acting_user_may_pause_only_the_workflows_they_may_pause(client, people):
    fin = User.objects.create_user("fin")
    new_run()  # the workflow's row, which the object permission is given on
    assign_perm(f"runs.{dispatch.PERMISSION}", fin, Workflow.objects.get(name="test-orders"))
    # Made by nobody: the maker never counted, only the person the token acts for.
    headers = _bearer("finance", acting_for=fin)
    refused = _post(client, headers, "test-two-systems", "pause")
    assert (refused.status_code, refused.json()["error"]) == (403, "forbidden")
    assert not DispatchPause.objects.filter(workflow_name="test-two-systems").exists()

    paused = _post(client, headers, "test-orders", "pause")
    assert paused.status_code == 200 and paused.json()["paused"] is True
    assert paused.json()["pauses"][0]["paused_by"] == "fin"
    resumed = _post(client, headers, "test-orders", "resume", reason="vendor back")
    assert resumed.status_code == 200 and resumed.json()["paused"] is False
    assert list(ControlRecord.objects.order_by("id").values_list(
        "action", "actor_label", "actor_user_id")) == [("dispatch_paused", "fin", fin.pk),
                                                        ("dispatch_resumed", "fin", fin.pk)]


def test_a_person_who_may_pause_resumes_what_they_paused(client, people):
    headers = _bearer("ops", acting_for=people["olga"])
    assert _post(client, headers, "test-orders", "pause").status_code == 200
    assert DispatchPause.objects.get().paused_by == "olga"
    assert _post(client, headers, "test-orders", "resume").status_code == 200
    assert not DispatchPause.objects.exists()
