"""The console's approvals inbox pages by the API's keyset cursor: a request decided while
one page is open (it leaves the inbox) makes the next page skip no other request, where an
offset would skip the one that took its place. A cursor that names no place in the inbox
starts over at the first page, as the runs list's does."""

import re
import uuid
from html import unescape

import pytest
from django.urls import reverse

from approvals import decisions
from approvals.models import ApprovalRequest, RequestStatus
from approvals.views import INBOX_PAGE
from tests.approvals.conftest import later, open_request, waiting_run
from tests.approvals.scale import add_requests

pytestmark = pytest.mark.django_db


def _shown(response) -> list[int]:
    assert response.status_code == 200
    return [approval.pk for approval in response.context["page"]]


def _next_link(response) -> str:
    found = re.search(r'<a href="(\?[^"]+)">Next', response.content.decode())
    assert found is not None, "no link to the next page"
    return reverse("approvals:inbox") + unescape(found[1])


def test_a_request_decided_on_the_first_page_makes_the_second_skip_none(approvers, ann,
                                                                       client, t0):
    # Asked a day ago, so due before the copies (which are no registered workflow's, and
    # so cannot be decided): the first on the first page, decided there.
    template = open_request(waiting_run(), later(t0, days=-1))
    add_requests(template, pending=INBOX_PAGE, workflows=1)
    waiting = set(ApprovalRequest.objects.filter(status=RequestStatus.PENDING)
                  .values_list("pk", flat=True))
    assert len(waiting) == INBOX_PAGE + 1
    client.force_login(ann)

    first = client.get(reverse("approvals:inbox"))
    on_first = _shown(first)
    assert len(on_first) == INBOX_PAGE
    assert on_first[0] == template.pk
    decided = decisions.decide(on_first[0], user=ann, approved=True,
                               decision_id=uuid.uuid4())
    assert decided.recorded
    on_second = _shown(client.get(_next_link(first)))

    assert len(on_first) + len(on_second) == len(waiting)  # none twice
    assert set(on_first) | set(on_second) == waiting      # none skipped


def test_an_inbox_cursor_that_names_no_place_in_it_starts_over_at_the_first_page(
        approvers, ann, client):
    template = open_request(waiting_run())
    add_requests(template, pending=INBOX_PAGE, workflows=1)
    client.force_login(ann)
    first = _shown(client.get(reverse("approvals:inbox")))
    # Not a cursor; a runs list's cursor (one time, not two); a cursor whose id no
    # bigint holds.
    for after in ("garbage", "1700000000000000.5", "1.2.99999999999999999999"):
        response = client.get(reverse("approvals:inbox"), {"after": after})
        assert _shown(response) == first, after
        assert "First page</a>" not in response.content.decode()
