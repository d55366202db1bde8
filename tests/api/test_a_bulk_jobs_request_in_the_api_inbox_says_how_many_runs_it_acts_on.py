"""A bulk job's four-eyes request hangs on one of its runs (the lowest id), yet approving it
acts on every run of the job that waits in it. The API's inbox gave it as any request:
`run_id`, the one run, and nothing that told an integration deciding it that it ends the
other runs too. It now gives the bulk job and how many runs an approval acts on (one, for a
request about one run)."""

import pytest
from django.contrib.auth.models import Group, Permission, User

from api.tokens import token_create
from approvals import four_eyes
from console.roles import ensure_roles
from tests.approvals.bulk_requests import bulk_terminate, run_with_an_effect

pytestmark = pytest.mark.django_db


@pytest.fixture
def people(db):
    """olga decides, carl asks."""
    ensure_roles(Group, Permission)
    olga, carl = User.objects.create_user("olga"), User.objects.create_user("carl")
    for user in (olga, carl):
        user.groups.add(Group.objects.get(name="operators"))
    return olga, carl


def test_the_inbox_names_the_bulk_job_and_how_many_runs_its_request_acts_on(client, people):
    olga, carl = people
    runs = [run_with_an_effect(), run_with_an_effect(), run_with_an_effect()]
    job = bulk_terminate(user=carl)
    single = run_with_an_effect()
    alone, _ = four_eyes.request_operator_action(single, action="terminate",
                                                 requested_by=carl, reason="duplicate")
    _, plaintext = token_create(name="ops", workflows=["test-orders"], acting_user=olga)

    response = client.get("/api/approvals", HTTP_AUTHORIZATION=f"Bearer {plaintext}")

    assert response.status_code == 200, response.content
    listed = {r["id"]: r for r in response.json()["requests"]}
    bulk = listed[job.approval_id]
    assert (bulk["run_id"], bulk["bulk_job"], bulk["run_count"]) == (runs[0].pk, job.pk, 3)
    assert (listed[alone.pk]["run_id"], listed[alone.pk]["bulk_job"],
            listed[alone.pk]["run_count"]) == (single.pk, None, 1)
