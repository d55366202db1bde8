"""The person who decides a bulk job's request, or may decide it while it waits, follows the
job (read only) by one rule on the console's page and over the API (approvals.bulk.may_watch).
The API let a token follow only a job whose filter named one of its workflows whole, so the
approver of a job over several workflows (or all of them) was answered 404 by the very
`bulk_job_url` their decision's answer gave them. Their token now follows it where it may see
and decide the job's request (every run the job handled is of the token's workflows); a
person with nothing to do with the job, or a token that could not see the request, still
gets 404, and the approver never cancels."""

import uuid

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.urls import reverse

from api.tokens import token_create
from approvals.bulk import run_bulk_job
from approvals.models import BulkJob
from audit.models import AuditRecord
from console.roles import ensure_roles
from tests.approvals.bulk_requests import bulk_terminate, run_with_an_effect

pytestmark = pytest.mark.django_db

BOTH = ["test-orders", "test-charge-then-wait"]


@pytest.fixture
def people(db):
    """olga and vera, operators, may decide the job's request; carl, an operator, asks;
    abe decides approvals of other kinds and has nothing to do with the job."""
    ensure_roles(Group, Permission)
    users = [User.objects.create_user(name) for name in ("olga", "vera", "carl", "abe")]
    for user in users[:3]:
        user.groups.add(Group.objects.get(name="operators"))
    users[3].groups.add(Group.objects.get(name="approvers"))
    return users


def bearer(user, workflows=BOTH) -> dict:
    _, plaintext = token_create(name=f"ops-{user.username}-{len(workflows)}",
                                workflows=workflows, acting_user=user)
    return {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}


@pytest.fixture
def job(people) -> BulkJob:
    """carl's terminate of every run in attention, of both workflows: each waits for a
    second person in the job's one request."""
    for workflow in ("test-orders", "test-orders", "test-charge-then-wait"):
        run_with_an_effect(workflow)
    job = bulk_terminate(user=people[2])  # no workflow named: all of them
    assert job.filters["workflow"] == "" and job.approval.is_pending
    return job


def page_status(client, user, job) -> int:
    client.force_login(user)
    return client.get(reverse("console:bulk_job", args=[job.pk])).status_code


def test_who_may_decide_the_request_follows_the_job_and_nobody_else_does(client, people, job):
    olga, vera, carl, abe = people
    url = f"/api/bulk/{job.pk}"

    followed = client.get(url, **bearer(olga))

    assert followed.status_code == 200, followed.content
    assert (followed.json()["phase"], followed.json()["outcomes"]) == (
        "acting", {"second_person": 3})
    assert client.get(url, **bearer(vera)).status_code == 200
    # Nothing to do with the job; or a token that may not see the request, which reaches a
    # workflow beyond it; or the starter's token, whose filter named no workflow whole.
    assert client.get(url, **bearer(abe)).status_code == 404
    assert client.get(url, **bearer(olga, ["test-orders"])).status_code == 404
    assert client.get(url, **bearer(carl)).status_code == 404
    # The console's page, by the same rule.
    assert [page_status(client, user, job) for user in (olga, vera, abe)] == [200, 200, 403]


def test_the_approver_follows_the_link_the_decision_answers_with_and_never_cancels(
        client, people, job):
    olga, vera, _, abe = people
    hers = bearer(olga)

    decided = client.post(f"/api/approvals/{job.approval_id}/decision",
                          {"approve": True, "decision_id": str(uuid.uuid4())},
                          content_type="application/json", **hers)

    assert decided.status_code == 200, decided.content
    link = decided.json()["bulk_job_url"]
    assert link.endswith(f"/api/bulk/{job.pk}")
    progress = client.get(link, **hers)
    assert progress.status_code == 200, progress.content
    assert (progress.json()["status"], progress.json()["phase"]) == ("running", "applying")
    assert client.post(f"/api/bulk/{job.pk}/cancel", **hers).status_code == 404
    assert BulkJob.objects.get(pk=job.pk).status == "running"
    # Decided by olga: vera may decide it no more, and follows it no more; abe never did.
    assert client.get(link, **bearer(vera)).status_code == 404
    assert client.get(link, **bearer(abe)).status_code == 404
    assert [page_status(client, user, job) for user in (olga, vera, abe)] == [200, 403, 403]

    run_bulk_job(job.pk)

    done = client.get(link, **hers).json()
    assert (done["status"], done["outcomes"]) == ("done", {"done": 3})
    assert AuditRecord.objects.filter(action="terminated").count() == 3
