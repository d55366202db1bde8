"""A large approver group reminded for days gives one request thousands of notifications. Its
admin page shows only the newest NOTIFICATIONS_SHOWN of them, says how many there are in all
and links to the outbox's list of exactly that request's, at the same number of queries
however many there are; the page stays read-only."""

import re
import uuid
from datetime import timedelta
from html import unescape

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals.admin import NOTIFICATIONS_SHOWN
from approvals.models import ApprovalRequest, Notification
from tests.factories import new_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client):
    client.force_login(User.objects.create_superuser("root", "root@example.com", "x"))
    return client


def a_request() -> ApprovalRequest:
    now = timezone.now()
    return ApprovalRequest.objects.create(
        run=new_run(), step_name="approve", snapshot={}, snapshot_hash="h",
        timeout=timedelta(days=7), on_timeout="reject", requested_at=now,
        due_at=now + timedelta(days=7))


def notify(request: ApprovalRequest, n: int, domain: str = "example.com") -> list[int]:
    """n more reminders of `request`, to approver<k>@<domain>, k counting on from the last;
    their ids, oldest first."""
    now = timezone.now()
    first = request.notifications.count()
    Notification.objects.bulk_create(
        Notification(request=request, kind="reminder", recipient=f"approver{k}@{domain}",
                     subject="s", body="b", next_attempt_at=now, message_id=uuid.uuid4().hex,
                     created_at=now)
        for k in range(first, first + n))
    return list(request.notifications.order_by("pk").values_list("pk", flat=True))


def page_of(request: ApprovalRequest) -> str:
    return f"/admin/approvals/approvalrequest/{request.pk}/change/"


def shown_recipients(text: str, domain: str = "example.com") -> set[int]:
    return {int(k) for k in re.findall(rf"approver(\d+)@{re.escape(domain)}", text)}


def test_the_page_shows_the_newest_notifications_and_leads_to_exactly_the_requests_all(
        admin_client):
    request, other = a_request(), a_request()
    notify(other, 7, domain="example.org")
    ids = notify(request, 120)
    assert NOTIFICATIONS_SHOWN < 120

    page = admin_client.get(page_of(request))
    assert page.status_code == 200
    formset = page.context["inline_admin_formsets"][0].formset
    assert [form.instance.pk for form in formset.forms] == ids[::-1][:NOTIFICATIONS_SHOWN]
    rows = re.findall(r'<tr class="form-row[^"]*"\s+id="notifications-(\d+)"', page.text)
    assert len(rows) == NOTIFICATIONS_SHOWN
    # The newest are approver70..approver119; none of the older ones, none of the other
    # request's.
    assert shown_recipients(page.text) == set(range(120 - NOTIFICATIONS_SHOWN, 120))
    assert shown_recipients(page.text, "example.org") == set()
    assert "120 in all" in page.text
    # Still read-only: no save button, no editable notification field.
    assert 'name="_save"' not in page.text
    assert 'name="notifications-0-status"' not in page.text

    links = [unescape(href) for href in re.findall(r'href="([^"]*/notification/\?[^"]*)"',
                                                    page.text)]
    assert len(links) == 1, links
    listing = admin_client.get(links[0])
    assert listing.status_code == 200
    changelist = listing.context["cl"]
    assert set(changelist.queryset.values_list("pk", flat=True)) == set(ids)
    assert changelist.result_count == 120
    assert {n.request_id for n in changelist.result_list} == {request.pk}


def test_the_page_makes_as_many_queries_at_120_notifications_as_at_60_and_at_10(
        admin_client):
    request = a_request()
    counts = {}
    for total, more in ((10, 10), (60, 50), (120, 60)):
        notify(request, more)
        with CaptureQueriesContext(connection) as ctx:
            page = admin_client.get(page_of(request))
        assert page.status_code == 200
        assert f"{total} in all" in page.text
        counts[total] = len(ctx)
    assert counts[120] == counts[60] == counts[10], counts


def test_staff_who_may_not_see_notifications_see_neither_them_nor_their_count(client):
    request = a_request()
    notify(request, 3)
    clerk = User.objects.create_user("clerk", "clerk@example.com", "x", is_staff=True)
    clerk.user_permissions.add(Permission.objects.get(codename="view_approvalrequest"))
    client.force_login(clerk)
    page = client.get(page_of(request))
    assert page.status_code == 200
    assert shown_recipients(page.text) == set()
    assert "in all" not in page.text and "/notification/?" not in page.text
