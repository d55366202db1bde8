"""The approver's inbox: what waits for me, since when, due when, overdue first, in a
constant number of queries."""

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from approvals import requests, selectors
from approvals.models import ApprovalRequest
from tests.approvals.conftest import later, open_request, waiting_run

pytestmark = pytest.mark.django_db


def test_the_inbox_lists_what_i_may_decide_overdue_first(approvers, ann, carol, dora, client,
                                                          t0):
    old = open_request(waiting_run(), later(t0, days=-4))      # due a day ago
    new = open_request(waiting_run(), t0)
    mine_by_name = open_request(waiting_run("test-approval-cancel"), later(t0, hours=-1))
    deputies_only = open_request(waiting_run("test-approval-escalate"), t0)
    ApprovalRequest.objects.filter(pk=deputies_only.pk).update(approvers=["group:nobody"])
    from approvals.models import ApprovalRequestGroupObjectPermission
    ApprovalRequestGroupObjectPermission.objects.filter(
        content_object=deputies_only).delete()

    assert list(selectors.inbox(ann)) == [old, mine_by_name, new]
    assert list(selectors.inbox(carol)) == []
    assert list(selectors.inbox(dora)) == []
    root = User.objects.create_superuser("root", "root@example.com", "pw")
    assert set(selectors.inbox(root)) == {old, new, mine_by_name, deputies_only}

    client.force_login(ann)
    response = client.get(reverse("approvals:inbox"))
    assert response.status_code == 200
    html = response.content.decode()
    assert html.index(f'/approvals/{old.pk}/"') < html.index(f'/approvals/{new.pk}/"')
    assert html.count("overdue</span>") == 1
    assert f'/approvals/{deputies_only.pk}/"' not in html

    client.force_login(carol)
    assert "Nothing waits for your decision" in client.get(reverse("approvals:inbox")) \
        .content.decode()


def test_the_inbox_costs_the_same_queries_for_one_request_as_for_many(approvers, ann, client):
    client.force_login(ann)
    open_request(waiting_run())
    # Once before counting: the first page a process serves also fills its caches (content
    # types, which depend on what ran before it), and that is no cost of the list.
    assert client.get(reverse("approvals:inbox")).status_code == 200
    with CaptureQueriesContext(connection) as one:
        assert client.get(reverse("approvals:inbox")).status_code == 200
    for _ in range(6):
        waiting_run()
    requests.open_pending_requests()
    with CaptureQueriesContext(connection) as seven:
        response = client.get(reverse("approvals:inbox"))
    assert len(response.context["page"]) == 7
    assert len(seven) == len(one), [q["sql"] for q in seven]


def test_the_page_shows_the_snapshot_escaped(approvers, ann, client):
    request = open_request(waiting_run("test-approval-escalate", amount=990))
    client.force_login(ann)
    html = client.get(reverse("approvals:detail", kwargs={"pk": request.pk})).content.decode()
    assert "990 EUR" in html
    assert "&lt;b&gt;bold&lt;/b&gt; &amp; co" in html and "<b>bold</b>" not in html
    assert request.snapshot_hash in html


def test_the_page_says_what_happens_once_it_is_approved(approvers, ann, client):
    from django.urls import reverse

    from tests.approvals.conftest import open_request, waiting_run

    approval = open_request(waiting_run(amount=75))
    client.force_login(ann)
    html = client.get(reverse("approvals:detail", kwargs={"pk": approval.pk})).content.decode()
    assert 'id="what-follows"' in html and "What happens once it is approved" in html
    # test-approval's only later step is "pay", a write it declares no description for.
    assert "pay: change another system" in html
