"""A workflow's name is declared in code and may hold a "/" (or a "~", or be "." or ".."):
the console writes such a name in a path with the converter `name`
(runs.definitions.name_in_path: "/" as "~2F"), and the API's dispatch routes now take it the
same way. They took the name as one plain segment, so the dispatch of "billing/eu" could be
neither read, paused nor resumed over the API, however the name was escaped. A path whose
"~" stands for no character, or that writes the "/" as it is, names no workflow: 404, and
nothing is paused."""

from urllib.parse import unquote

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from pydantic import BaseModel

from api.tokens import token_create
from runs.definitions import definition
from runs.definitions.definition import Workflow
from runs.machine import dispatch
from runs.models import ControlRecord, DispatchPause
from tests.workflows import FAST, scripted_call

pytestmark = pytest.mark.django_db

NAME = "billing/eu"


class In(BaseModel):
    order: str


@pytest.fixture(autouse=True)
def _fresh_pauses():
    dispatch.forget_cache()
    yield
    dispatch.forget_cache()


def _register(name):
    workflow = Workflow(name, version=1, input=In)

    @workflow.write("charge", retry=FAST, honours_key=True)
    def charge(ctx):
        return scripted_call(ctx, lambda: {})

    return workflow


@pytest.fixture
def registered():
    workflows = []

    def register(name):
        workflows.append(_register(name))

    yield register
    for workflow in workflows:
        definition.registry.unregister(workflow)


def _bearer(*names):
    _, plaintext = token_create(name="ops", workflows=list(names),
                                acting_user=User.objects.create_superuser("boss"))
    return {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}


def _post(client, headers, path, **body):
    return client.post(path, {"reason": "incident", **body}, content_type="application/json",
                       **headers)


def test_a_name_with_a_slash_is_read_paused_and_resumed_written_as_the_console_writes_it(
        client, registered):
    registered(NAME)
    headers = _bearer(NAME)
    assert reverse("api:dispatch_state", args=[NAME]) == "/api/workflows/billing~2Feu/dispatch"
    state = client.get("/api/workflows/billing~2Feu/dispatch", **headers)
    assert state.status_code == 200, state.content
    assert state.json() == {"workflow": NAME, "paused": False, "pauses": []}
    paused = _post(client, headers, "/api/workflows/billing~2Feu/dispatch/pause")
    assert paused.status_code == 200, paused.content
    assert paused.json()["paused"] is True
    assert list(DispatchPause.objects.values_list("workflow_name", "system")) == [(NAME, "")]
    resumed = _post(client, headers, "/api/workflows/billing~2Feu/dispatch/resume")
    assert resumed.status_code == 200, resumed.content
    assert not DispatchPause.objects.exists()
    assert list(ControlRecord.objects.values_list("action", "workflow_name")) == [
        ("dispatch_paused", NAME), ("dispatch_resumed", NAME)]


@pytest.mark.parametrize("name", ["a~2Fb", "~", "..", ".", "x/dispatch"])
def test_each_name_is_paused_through_the_path_the_console_links_to_and_no_other(
        client, registered, name):
    # "a~2Fb" and "a/b" are two workflows: each has its own path, and only one is paused.
    registered(name)
    registered("a/b")
    console_path = unquote(reverse("console:dispatch_pause", args=[name]))
    segment = console_path.removeprefix("/workflows/").removesuffix("/dispatch/")
    response = _post(client, _bearer(name, "a/b"), f"/api/workflows/{segment}/dispatch/pause")
    assert response.status_code == 200, response.content
    assert response.json()["workflow"] == name
    assert list(DispatchPause.objects.values_list("workflow_name", flat=True)) == [name]


@pytest.mark.parametrize("path", ["/api/workflows/billing/eu/dispatch/pause",
                                  "/api/workflows/billing%2Feu/dispatch/pause",
                                  "/api/workflows/billing~2Geu/dispatch/pause"])
def test_a_name_written_any_other_way_is_not_found_and_nothing_is_paused(client, registered,
                                                                        path):
    registered(NAME)
    response = _post(client, _bearer(NAME), path)
    assert response.status_code == 404, response.content
    assert response.json()["error"] == "not_found"
    assert not DispatchPause.objects.exists() and not ControlRecord.objects.exists()
