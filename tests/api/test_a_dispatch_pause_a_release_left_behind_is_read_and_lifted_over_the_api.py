"""A dispatch pause of a workflow a release removed (whole, or towards one of its systems)
is still read and lifted over the API, as from the console and the CLI: the API's dispatch
routes answered 404 `unknown_workflow` for it because the code no longer registers the
workflow, so a token scoped to it, acting for a person who may lift it, could neither see
nor lift the pause. Which action such a workflow allows is the rule every path passes
(approvals.operator_actions.refuse_workflow_action): only the lifting of the pause in force;
a new pause of it, a second resume, or a resume of a pause it does not have is 404 and
changes nothing, and a person who may not pause it is refused 403."""

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from api.tokens import token_create
from runs.machine import dispatch
from runs.models import ControlRecord, DispatchPause

pytestmark = pytest.mark.django_db

RETIRED = "retired-flow"
URL = f"/api/workflows/{RETIRED}/dispatch"


@pytest.fixture(autouse=True)
def _fresh_pauses():
    dispatch.forget_cache()
    yield
    dispatch.forget_cache()


@pytest.fixture
def boss(db):
    return User.objects.create_superuser("boss")


def _bearer(person):
    _, plaintext = token_create(name=f"t-{person.username}", workflows=[RETIRED],
                                acting_user=person)
    return {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}


def _left_behind(system=""):
    DispatchPause.objects.create(workflow_name=RETIRED, system=system, reason="vendor gone",
                                 paused_by="olga", paused_at=timezone.now())


def _post(client, headers, change, **body):
    return client.post(f"{URL}/{change}", {"reason": "vendor retired", **body},
                       content_type="application/json", **headers)


def _written():
    return (list(DispatchPause.objects.values_list("workflow_name", "system")),
            ControlRecord.objects.count())


def test_its_state_is_read_while_the_pause_is_in_force(client, boss):
    _left_behind()
    response = client.get(URL, **_bearer(boss))
    assert response.status_code == 200, response.content
    state = response.json()
    assert state["workflow"] == RETIRED and state["paused"] is True
    assert [(p["system"], p["paused_by"], p["reason"]) for p in state["pauses"]] == [
        ("", "olga", "vendor gone")]


def test_the_pause_is_lifted_once_as_the_tokens_person(client, boss):
    _left_behind()
    headers = _bearer(boss)
    response = _post(client, headers, "resume")
    assert response.status_code == 200, response.content
    assert response.json() == {"workflow": RETIRED, "paused": False, "pauses": []}
    assert not DispatchPause.objects.exists()
    assert list(ControlRecord.objects.values_list("action", "workflow_name", "actor_label")) \
        == [("dispatch_resumed", RETIRED, "boss")]
    # Lifted, the workflow is no one's again: read or resumed, it is not found.
    written = _written()
    assert client.get(URL, **headers).status_code == 404
    again = _post(client, headers, "resume")
    assert again.status_code == 404 and again.json()["error"] == "unknown_workflow"
    assert _written() == written


def test_a_pause_towards_one_system_is_lifted_by_naming_that_system(client, boss):
    _left_behind(system="fax")
    headers = _bearer(boss)
    before = _written()
    whole = _post(client, headers, "resume")
    assert whole.status_code == 404 and whole.json()["error"] == "unknown_workflow"
    assert _written() == before
    response = _post(client, headers, "resume", system="fax")
    assert response.status_code == 200, response.content
    assert not DispatchPause.objects.exists()
    assert ControlRecord.objects.filter(action="dispatch_resumed", target="fax").count() == 1


def test_a_new_pause_of_it_is_not_found_and_nothing_is_paused(client, boss):
    _left_behind(system="fax")
    before = _written()
    response = _post(client, _bearer(boss), "pause")
    assert response.status_code == 404 and response.json()["error"] == "unknown_workflow"
    assert _written() == before


def test_a_person_who_may_not_pause_it_is_refused_and_the_pause_stays(client):
    _left_behind()
    before = _written()
    response = _post(client, _bearer(User.objects.create_user("nobody")), "resume")
    assert response.status_code == 403 and response.json()["error"] == "forbidden"
    assert _written() == before


def test_a_workflow_neither_registered_nor_paused_is_still_not_found(client, boss):
    DispatchPause.objects.create(workflow_name="other-retired", system="", reason="x",
                                 paused_by="olga", paused_at=timezone.now())
    response = client.get(URL, **_bearer(boss))
    assert response.status_code == 404 and response.json()["error"] == "unknown_workflow"
