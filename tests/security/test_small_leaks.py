"""Small leaks closed: a workflow's page needs permission on that workflow, a runbook needs
a console permission, business keys refuse invisible line breaks and bidirectional
controls, and an archived run answers 410 naming its archive."""

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.urls import reverse
from guardian.shortcuts import assign_perm

from api.tokens import token_create
from archive.archiving import archive_runs
from audit.chain import Actor
from console.roles import ensure_roles
from runs.execution import executor
from runs.machine.errors import InvalidInput
from runs.machine.transitions import start_run
from runs.models import Run, RunStatus, Workflow
from tests.archive.conftest import age
from tests.factories import new_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def people(db):
    ensure_roles(Group, Permission)
    new_run("test-orders"), new_run("test-saga")  # the workflow rows exist
    nobody = User.objects.create_user("nobody", password="pw")
    finance = User.objects.create_user("fin", password="pw")
    assign_perm("runs.view_runs", finance, Workflow.objects.get(name="test-orders"))
    operator = User.objects.create_user("olga", password="pw")
    operator.groups.add(Group.objects.get(name="operators"))
    return {"nobody": nobody, "finance": finance, "operator": operator}


def _get(client, user, url):
    client.force_login(user)
    return client.get(url)


def test_a_workflow_page_needs_permission_on_that_workflow(people, client):
    orders = reverse("console:workflow", args=["test-orders"])
    saga = reverse("console:workflow", args=["test-saga"])

    assert _get(client, people["nobody"], orders).status_code == 403
    assert _get(client, people["finance"], orders).status_code == 200
    refused = _get(client, people["finance"], saga)
    assert refused.status_code == 403
    assert b"auto_compensate" not in refused.content and b"test-saga" not in refused.content
    assert _get(client, people["operator"], saga).status_code == 200


def test_a_runbook_needs_some_console_permission(people, client):
    url = reverse("console:runbook", args=["unknown_outcome"])

    refused = _get(client, people["nobody"], url)
    assert refused.status_code == 403 and b"reconcile" not in refused.content.lower()
    assert _get(client, people["finance"], url).status_code == 200
    assert _get(client, people["operator"], url).status_code == 200


@pytest.mark.parametrize("character", ["\u2028", "\u2029", "\u202e", "\u2066", "\u200f",
                                       "\u061c", "\u0085"])
def test_business_keys_refuse_unicode_separators_and_bidi_controls(character, client):
    key = f"tenant-42:inv{character}-1847"
    before = Run.objects.count()

    with pytest.raises(InvalidInput, match="control characters") as refused:
        start_run(workflow="test-orders", business_key=key, input={"order": "x"},
                  actor=Actor.system())
    assert refused.value.errors == [{"loc": ["business_key"], "msg": "contains control characters"}]

    _, plaintext = token_create(name="erp", workflows=["test-orders"])
    response = client.post("/api/runs", {"workflow": "test-orders", "business_key": key,
                                         "input": {"order": "x"}},
                           content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    assert response.status_code == 422
    assert "business_key" in response.content.decode()
    assert Run.objects.count() == before


def test_an_ordinary_unicode_business_key_is_still_accepted():
    run, created = start_run(workflow="test-orders", business_key="Müller-Lüdenscheid:Ω-7",
                             input={"order": "x"}, actor=Actor.system())
    assert created and run.business_key == "Müller-Lüdenscheid:Ω-7"


def test_an_archived_run_answers_410_with_its_archive(client, settings, tmp_path):
    settings.VAR_DIR, settings.RUNS_RETENTION_DAYS = tmp_path, 30
    settings.STORAGES = {k: v for k, v in settings.STORAGES.items() if k != "archive"}
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    age(run, days=40)
    assert archive_runs(actor="test").runs_removed == 1
    _, mine = token_create(name="erp", workflows=["test-orders"])
    _, other = token_create(name="crm", workflows=["test-saga"])

    gone = client.get(f"/api/runs/{run.pk}", HTTP_AUTHORIZATION=f"Bearer {mine}")
    hidden = client.get(f"/api/runs/{run.pk}", HTTP_AUTHORIZATION=f"Bearer {other}")

    assert gone.status_code == 410
    body = gone.json()
    assert body["error"] == "run_archived"
    assert body["archived_run"]["id"] == run.pk
    assert body["archived_run"]["archive_file"].startswith("runs/")
    assert body["archived_run"]["final_state"] == "completed"
    # A token for another workflow never learns that the run existed.
    assert hidden.status_code == 404 and hidden.json()["error"] == "run_not_found"
