"""An approver's inbox checks their grant on each open request it lists, along the
object-permission tables' indexes on the request: a group is granted every request it is
named on and keeps the grant once the request is decided, and the inbox asked whether a
request is among all of them (PostgreSQL hashed every grant the group ever held, and each
held by name): 600 ms a page for a group named on 116,806 requests at a million runs,
growing with the group's history rather than with what waits. Here the group and ann by
name hold grants on OLD decided requests, and the inbox's query reads the grants of the
few open ones."""

import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from approvals.models import (
    DECIDE_CODENAME,
    ApprovalRequest,
    ApprovalRequestGroupObjectPermission,
    ApprovalRequestUserObjectPermission,
    RequestKind,
    RequestStatus,
)
from tests.admin.scale import rows_read
from tests.approvals.conftest import open_request, waiting_run
from tests.approvals.scale import add_requests

pytestmark = pytest.mark.django_db

OLD = 600
GRANTS = ("approvals_approvalrequestgroupobjectpermission",
          "approvals_approvalrequestuserobjectpermission")


def test_the_inbox_reads_the_grants_of_what_waits_not_of_every_request_ever_granted(
        approvers, ann, operators, client):
    olga, _ = operators
    template = open_request(waiting_run())
    add_requests(template, pending=5, decided=OLD, operator_actions=3, requested_by=olga,
                 workflows=2)
    decide = Permission.objects.get(codename=DECIDE_CODENAME)
    decided = list(ApprovalRequest.objects.exclude(status=RequestStatus.PENDING))
    assert len(decided) == OLD
    ApprovalRequestGroupObjectPermission.objects.bulk_create(
        ApprovalRequestGroupObjectPermission(content_object=old, group=approvers,
                                             permission=decide) for old in decided)
    ApprovalRequestUserObjectPermission.objects.bulk_create(
        ApprovalRequestUserObjectPermission(content_object=old, user=ann, permission=decide)
        for old in decided)
    # The operator actions (olga's) are granted to the group too: ann, who holds no
    # operator permission, may decide them through it (approvals.permissions.still_an_approver).
    actions = list(ApprovalRequest.objects.filter(kind=RequestKind.OPERATOR_ACTION))
    ApprovalRequestGroupObjectPermission.objects.bulk_create(
        ApprovalRequestGroupObjectPermission(content_object=action, group=approvers,
                                             permission=decide) for action in actions)
    with connection.cursor() as cursor:
        for table in ("approvals_approvalrequest", *GRANTS):
            cursor.execute(f"ANALYZE {table}")

    client.force_login(ann)
    with CaptureQueriesContext(connection) as ctx:
        page = client.get(reverse("approvals:inbox"))
    assert page.status_code == 200
    waiting = set(ApprovalRequest.objects.filter(status=RequestStatus.PENDING)
                  .values_list("pk", flat=True))
    assert len(waiting) == 1 + 5 + 3
    assert {approval.pk for approval in page.context["page"]} == waiting
    listing = [q["sql"] for q in ctx.captured_queries
               if q["sql"].startswith("SELECT") and GRANTS[0] in q["sql"]
               and 'FROM "approvals_approvalrequest"' in q["sql"]]
    assert len(listing) == 1, listing
    reads = {table: rows_read(listing[0], table) for table in GRANTS}
    # A few grants of each of the nine open requests (the groups' on it, the first of
    # which is ann's), not the 2 * OLD the group and ann hold on requests decided long ago.
    assert 0 < sum(reads.values()) <= 4 * len(waiting), reads
