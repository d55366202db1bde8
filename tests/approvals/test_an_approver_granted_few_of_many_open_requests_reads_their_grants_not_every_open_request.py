"""The inbox of an approver granted few of many open requests reads their grants and the
requests these name, not every open request. Checking the grant on each open request
(approvals.permissions.granted_on_each, so that a group's history of grants is not read)
made the inbox of someone granted 30 of 1,500 open requests read all 1,500 (18,684 at a
million runs: 90-140 ms a page). The inbox reads the smaller side: the person's grants when
they are few (approvals.permissions.granted_to), else the open requests, each checked.
Here wendy's group is named on one open request in fifty; the approvers' group, ann's, on
every one."""

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from approvals.models import ApprovalRequest, RequestStatus
from tests.admin.scale import rows_read
from tests.approvals.conftest import open_request, waiting_run
from tests.approvals.scale import add_requests

pytestmark = pytest.mark.django_db

OPEN = 1500
WORKFLOWS = 50
TABLES = ("approvals_approvalrequest", "approvals_approvalrequestgroupobjectpermission",
          "approvals_approvalrequestuserobjectpermission")


def inbox_reads(client, user) -> tuple[set[int], dict[str, int]]:
    """The requests `user`'s inbox lists, and the rows of TABLES its queries read."""
    client.force_login(user)
    with CaptureQueriesContext(connection) as ctx:
        page = client.get(reverse("approvals:inbox"))
    assert page.status_code == 200
    selects = [q["sql"] for q in ctx.captured_queries if q["sql"].startswith("SELECT")
               and any(f'"{table}"' in q["sql"] for table in TABLES)]
    return ({approval.pk for approval in page.context["page"]},
            {table: sum(rows_read(sql, table) for sql in selects) for table in TABLES})


def test_the_inbox_of_an_approver_granted_few_reads_their_grants(approvers, ann, client):
    add_requests(open_request(waiting_run()), pending=OPEN, workflows=WORKFLOWS)
    wendy = User.objects.create_user("wendy", email="wendy@example.com")
    wendy.groups.add(Group.objects.get(name="scale-wf-7"))
    granted = set(ApprovalRequest.objects.filter(
        status=RequestStatus.PENDING,
        approvalrequestgroupobjectpermission__group__name="scale-wf-7")
        .values_list("pk", flat=True))
    assert len(granted) == OPEN // WORKFLOWS

    listed, reads = inbox_reads(client, wendy)
    assert listed == granted
    # Her group's grants and the requests they name: not the 1,500 open requests.
    assert 0 < sum(reads.values()) <= 4 * len(granted), reads

    # ann's group is named on every open request: the first page of them, as before.
    listed, reads = inbox_reads(client, ann)
    assert len(listed) == 50 and listed <= set(ApprovalRequest.objects.filter(
        status=RequestStatus.PENDING).values_list("pk", flat=True))
