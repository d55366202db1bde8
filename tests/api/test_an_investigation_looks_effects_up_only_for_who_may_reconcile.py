"""GET /api/runs/{id}/investigation?lookups=true looks effects up in other systems by key:
as on the console's investigation page, only for a token whose acting person has the
reconcile permission on the run's workflow. A token acting for nobody, or for a person
without it, is refused with 403 and nothing is asked of any system; without lookups the
card is theirs to read."""

import pytest
from django.contrib.auth.models import Group, Permission, User

from api.tokens import token_create
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.models import RunStatus, StepStatus
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


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


def _unknown_run():
    return place(new_run(), status=RunStatus.ATTENTION,
                 step_statuses={"create-task": StepStatus.UNKNOWN})


def test_lookups_for_a_person_without_the_reconcile_permission_are_403(client, people):
    run = _unknown_run()
    before = AuditRecord.objects.count()
    headers = _bearer(people["aude"], "aude")
    response = client.get(f"/api/runs/{run.pk}/investigation?lookups=true", **headers)
    assert response.status_code == 403, response.content
    assert response.json()["error"] == "forbidden"
    assert "reconcile" in response.json()["detail"]
    assert AuditRecord.objects.count() == before
    read = client.get(f"/api/runs/{run.pk}/investigation", **headers)
    assert read.status_code == 200 and read.json()["lookups_made"] is False


def test_lookups_for_a_token_acting_for_nobody_are_403(client, people):
    run = _unknown_run()
    response = client.get(f"/api/runs/{run.pk}/investigation?lookups=true",
                          **_bearer(None, "nobody"))
    assert (response.status_code, response.json()["error"]) == (403, "no_acting_user")


def test_lookups_for_a_person_who_may_reconcile_are_made(client, people):
    run = _unknown_run()
    response = client.get(f"/api/runs/{run.pk}/investigation?lookups=true",
                          **_bearer(people["olga"], "olga"))
    assert response.status_code == 200, response.content
    assert response.json()["lookups_made"] is True


def test_lookups_on_a_run_the_token_may_not_see_are_404_as_on_none(client, people):
    hidden = place(new_run("test-saga"), status=RunStatus.ATTENTION)
    headers = _bearer(people["aude"], "aude")
    seen = client.get(f"/api/runs/{hidden.pk}/investigation?lookups=true", **headers)
    unknown = client.get(f"/api/runs/{hidden.pk + 1000}/investigation?lookups=true",
                         **headers)
    assert seen.status_code == unknown.status_code == 404
    assert seen.json()["error"] == unknown.json()["error"] == "run_not_found"
