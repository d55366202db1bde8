"""An approval of a bulk job's request over the API is answered once the decision is
recorded, before any run is acted on: the answer says that the job applies it and links the
job's progress, which the approver's token may follow (not cancel) until the job's worker has
acted on each run once."""

import uuid

import pytest
from django.contrib.auth.models import Group, Permission, User

from api.tokens import token_create
from approvals.bulk import run_bulk_job
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.models import Run, RunStatus
from tests.approvals.bulk_requests import bulk_terminate, run_with_an_effect

pytestmark = pytest.mark.django_db


@pytest.fixture
def people(db):
    """olga decides, carl asked; vera, an operator too, neither."""
    ensure_roles(Group, Permission)
    users = [User.objects.create_user(name) for name in ("olga", "carl", "vera")]
    for user in users:
        user.groups.add(Group.objects.get(name="operators"))
    return users


def bearer(user) -> dict:
    _, plaintext = token_create(name=f"ops-{user.username}", workflows=["test-orders"],
                                acting_user=user)
    return {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}


def test_the_approver_is_answered_before_any_run_is_acted_on_and_follows_the_job(
        client, people):
    olga, carl, vera = people
    runs = [run_with_an_effect() for _ in range(3)]
    job = bulk_terminate(user=carl, workflow="test-orders")
    hers = bearer(olga)

    response = client.post(f"/api/approvals/{job.approval_id}/decision",
                           {"approve": True, "decision_id": str(uuid.uuid4())},
                           content_type="application/json", **hers)

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["outcome"] == "recorded"
    assert f"Bulk job {job.pk} is applying it" in body["message"]
    assert body["bulk_job_url"].endswith(f"/api/bulk/{job.pk}")
    assert {Run.objects.get(pk=r.pk).status for r in runs} == {RunStatus.ATTENTION}
    progress = client.get(body["bulk_job_url"], **hers)
    assert progress.status_code == 200, progress.content
    assert (progress.json()["status"], progress.json()["phase"]) == ("running", "applying")
    assert progress.json()["outcomes"] == {"second_person": 3}
    # Following is not cancelling; and whoever neither asked nor approved sees nothing.
    assert client.post(f"/api/bulk/{job.pk}/cancel", **hers).status_code == 404
    assert client.get(body["bulk_job_url"], **bearer(vera)).status_code == 404

    run_bulk_job(job.pk)

    done = client.get(body["bulk_job_url"], **hers).json()
    assert (done["status"], done["outcomes"]) == ("done", {"done": 3})
    for run in runs:
        assert AuditRecord.objects.filter(run=run, action="terminated").count() == 1


def test_a_rejection_links_no_job(client, people):
    olga, carl, _ = people
    run_with_an_effect()
    job = bulk_terminate(user=carl, workflow="test-orders")
    response = client.post(f"/api/approvals/{job.approval_id}/decision",
                           {"approve": False, "decision_id": str(uuid.uuid4()),
                            "comment": "not these"},
                           content_type="application/json", **bearer(olga))
    assert response.status_code == 200, response.content
    assert response.json()["bulk_job_url"] is None
    run_bulk_job(job.pk)
    assert not AuditRecord.objects.filter(action="terminated").exists()
