"""A token follows and cancels a bulk job of its person only when the job's filter names one
of the token's workflows whole. A job started in the console filters workflows by a part of
their names: "test-agent" reaches test-agent-saga too. Followed by a token scoped to
test-agent, its progress told how runs of test-agent-saga went, a workflow the token may
not see."""

import pytest
from django.contrib.auth.models import Group, Permission, User

from api.tokens import token_create
from approvals.bulk import start_bulk_job
from approvals.models import BulkJob, BulkJobStatus
from console.roles import ensure_roles
from runs.models import RunStatus
from runs.reads.selectors import RunFilters
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


@pytest.fixture
def olga(db):
    ensure_roles(Group, Permission)
    user = User.objects.create_user("olga")
    user.groups.add(Group.objects.get(name="operators"))
    return user


def headers_of(user, workflows):
    _, plaintext = token_create(name="t", workflows=workflows, acting_user=user)
    return {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}


def job_over(user, *, exact: bool) -> BulkJob:
    for workflow in ("test-agent", "test-agent-saga"):
        place(new_run(workflow, wake=False), status=RunStatus.ATTENTION)
    filters = RunFilters(workflow="test-agent", workflow_exact=exact, status="attention")
    job, _ = start_bulk_job("terminate", filters, user=user, reason="incident 7")
    return job


def test_a_job_over_every_workflow_whose_name_holds_the_tokens_is_not_the_tokens(client, olga):
    job = job_over(olga, exact=False)
    headers = headers_of(olga, ["test-agent"])

    shown = client.get(f"/api/bulk/{job.pk}", **headers)
    cancelled = client.post(f"/api/bulk/{job.pk}/cancel", **headers)

    assert (shown.status_code, shown.json()["error"]) == (404, "bulk_job_not_found")
    assert cancelled.status_code == 404
    assert BulkJob.objects.get(pk=job.pk).status != BulkJobStatus.CANCELLED


def test_a_job_that_names_the_tokens_workflow_whole_is_followed(client, olga):
    job = job_over(olga, exact=True)

    shown = client.get(f"/api/bulk/{job.pk}", **headers_of(olga, ["test-agent"]))

    assert shown.status_code == 200 and shown.json()["id"] == job.pk
