"""Approving a bulk job's one four-eyes request took the action on every run that waited for
it inside the approver's own web request, in one transaction: about 14 queries a run, so
past about a thousand runs the request outlasted a web server's timeout and could never be
decided. The approver's request now records the decision and hands the job back to its
worker (approvals.bulk_approved): its queries do not grow with the runs, it acts on none
of them, and the job's worker then takes the action on each run once, with both people
named and the decision's id, on the job's one path (run_bulk_job)."""

import html
import re
import uuid

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from approvals.bulk import bulk_progress, run_bulk_job
from approvals.decisions import decide
from approvals.models import ApprovalRequest, BulkJob, BulkOutcome, RequestStatus
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.models import Run, RunStatus
from tests.approvals.bulk_requests import bulk_terminate, run_with_an_effect

pytestmark = pytest.mark.django_db


@pytest.fixture
def people(db):
    """olga decides, carl asks; vera, an operator too, has nothing to do with the job."""
    ensure_roles(Group, Permission)
    users = [User.objects.create_user(name, password="pw") for name in ("olga", "carl", "vera")]
    for user in users:
        user.groups.add(Group.objects.get(name="operators"))
    return users


def _text(response) -> str:
    assert response.status_code == 200
    main = response.content.decode().split("<main", 1)[1]
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", main)).split())


def _approve_in_the_console(client, approval_id: int) -> tuple[int, object]:
    """olga's approval, posted as the request page posts it: the queries of her request."""
    with CaptureQueriesContext(connection) as queries:
        response = client.post(reverse("approvals:decide", kwargs={"pk": approval_id}),
                               {"decision": "approve", "decision_id": uuid.uuid4()})
    assert response.status_code == 302, response.content
    return len(queries), response


def _terminated(run) -> list[AuditRecord]:
    return list(AuditRecord.objects.filter(run=run, action="terminated"))


def test_the_approvers_request_costs_the_same_for_2_runs_as_for_30_and_acts_on_none(
        people, client):
    olga, carl, vera = people
    client.force_login(olga)
    few = [run_with_an_effect() for _ in range(2)]
    small = bulk_terminate(user=carl)
    few_queries, _ = _approve_in_the_console(client, small.approval_id)
    run_bulk_job(small.pk)
    assert {Run.objects.get(pk=r.pk).status for r in few} == {RunStatus.TERMINATED}

    many = [run_with_an_effect() for _ in range(30)]
    job = bulk_terminate(user=carl)  # the 2 above are no longer in attention
    assert BulkOutcome.objects.filter(job=job).count() == 30
    many_queries, response = _approve_in_the_console(client, job.approval_id)

    assert many_queries == few_queries
    # Recorded and settled, once, by its decision id; not one run acted on yet.
    request = ApprovalRequest.objects.get(pk=job.approval_id)
    assert request.status == RequestStatus.APPROVED and request.settled_at is not None
    assert request.apply_error == ""
    assert {Run.objects.get(pk=r.pk).status for r in many} == {RunStatus.ATTENTION}
    assert not AuditRecord.objects.filter(run__in=many, action="terminated").exists()
    job.refresh_from_db()
    assert (job.status, job.phase, job.lease_until) == ("running", "applying", None)
    assert bulk_progress(job.pk).counts == {"second_person": 30}

    # olga is told so, with the way to the job's progress, which she may follow.
    page = _text(client.get(response.url))
    assert (f"Bulk job {job.pk} is applying it: its worker takes the action on each of the "
            "30 runs that waited for it") in page
    assert (f"bulk job {job.pk} takes the action on each of the 30 runs that waited for "
            "it. Follow its progress") in page
    progress_link = reverse("console:bulk_job", args=[job.pk])
    assert f'href="{progress_link}"' in client.get(response.url).content.decode()
    progress = _text(client.get(progress_link))
    assert "applying the approval of request" in progress
    assert "Cancel the job" not in progress  # the job stays carl's to cancel
    client.force_login(vera)
    assert client.get(progress_link).status_code == 403

    # The job's worker: each run once, the requester acting, the approver named.
    job = run_bulk_job(job.pk)
    assert (job.status, job.phase) == ("done", "applying")
    assert bulk_progress(job.pk).counts == {"done": 30}
    for run in many:
        assert Run.objects.get(pk=run.pk).status == RunStatus.TERMINATED
        (record,) = _terminated(run)
        assert (record.actor_label, record.data["approved_by"]) == ("carl", "olga")
        assert record.data["decision_id"] == str(request.decision_id)

    # Neither a worker again, nor the decision sent again, acts on any run twice.
    run_bulk_job(job.pk)
    client.force_login(olga)
    again = client.post(reverse("approvals:decide", kwargs={"pk": request.pk}),
                        {"decision": "approve", "decision_id": request.decision_id})
    assert again.status_code == 302
    assert all(len(_terminated(run)) == 1 for run in many)
    assert BulkJob.objects.get(pk=job.pk).status == "done"
    assert AuditRecord.objects.filter(run__in=many, action="terminated").count() == 30


def test_a_run_that_moved_on_before_the_worker_reached_it_is_refused_there_not_acted_on(
        people):
    """As when the approval was applied in the approver's request: a run whose state no
    longer allows the action is refused, its outcome says why, and the others are done."""
    olga, carl, _ = people
    runs = [run_with_an_effect() for _ in range(3)]
    job = bulk_terminate(user=carl)
    decision = decide(job.approval_id, user=olga, approved=True, decision_id=uuid.uuid4())
    assert decision.recorded, decision.message
    Run.objects.filter(pk=runs[1].pk).update(status=RunStatus.COMPLETED)

    run_bulk_job(job.pk)

    outcomes = dict(BulkOutcome.objects.filter(job=job).values_list("run_id", "outcome"))
    assert outcomes == {runs[0].pk: "done", runs[1].pk: "refused", runs[2].pk: "done"}
    assert BulkOutcome.objects.get(job=job, run_id=runs[1].pk).message.startswith(
        "after approval:")
    assert not _terminated(runs[1])
    assert Run.objects.get(pk=runs[1].pk).status == RunStatus.COMPLETED
