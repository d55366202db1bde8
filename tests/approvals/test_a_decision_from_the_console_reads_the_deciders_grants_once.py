"""A decision posted from the console is checked by the page (may the person see the
request, may they decide it) and again by approvals.decisions.decide, before its lock and
under it. Each check is still made, and still refuses; the person's object permissions are
read once for all of them, not once for each."""

import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from approvals.models import ApprovalRequest, RequestStatus
from audit.models import AuditRecord
from runs.models import Run, RunStatus

pytestmark = pytest.mark.django_db

# Queries of one approval posted from the request's page, the session and the user
# included (37 while each check read the grants again).
MOST_QUERIES = 31


def _post(client, approval, **data):
    return client.post(reverse("approvals:decide", kwargs={"pk": approval.pk}), {
        "decision": "approve", "comment": "", "decision_id": str(uuid.uuid4()), **data})


def _grant_reads(ctx) -> int:
    return sum("objectpermission" in q["sql"] for q in ctx.captured_queries)


def test_an_approval_posted_from_the_console_reads_the_approvers_grants_once(pending, ann,
                                                                             client):
    client.force_login(ann)
    with CaptureQueriesContext(connection) as ctx:
        response = _post(client, pending)
    assert response.status_code == 302
    pending.refresh_from_db()
    assert pending.status == RequestStatus.APPROVED and pending.decided_by == ann
    # Guardian reads a user's grants and their groups' grants: two queries, once.
    assert _grant_reads(ctx) == 2, [q["sql"] for q in ctx.captured_queries]
    assert len(ctx) <= MOST_QUERIES, len(ctx)


def test_a_person_who_may_not_decide_is_refused_and_nothing_is_recorded(pending, carol,
                                                                        client):
    records = AuditRecord.objects.filter(run_id=pending.run_id).count()
    client.force_login(carol)
    response = _post(client, pending)
    # Nor may she see it: answered as a request that does not exist.
    assert response.status_code == 404
    assert b"Not found" in response.content
    pending.refresh_from_db()
    assert pending.status == RequestStatus.PENDING and pending.decision_id is None
    assert pending.decided_by_id is None and pending.settled_at is None
    assert AuditRecord.objects.filter(run_id=pending.run_id).count() == records
    assert Run.objects.get(pk=pending.run_id).status == RunStatus.WAITING
    assert ApprovalRequest.objects.filter(run_id=pending.run_id).count() == 1
