"""GET /api/approvals hands an approver every pending request they may decide, a page at a
time: following `next_cursor` (null on the last page) sees each request exactly once, in the
inbox's order (due, then asked, then id, ties included); a request decided between two
pages makes the next page skip none; a page costs the same queries among 250 requests as
among 50; an `after` of another shape, and a `limit` out of bounds, are refused with 422
naming them. The list used to stop at 200 requests without a cursor: the rest were out of
reach."""

import uuid
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from api.tokens import token_create
from approvals.models import ApprovalRequest, RequestStatus
from tests.approvals.conftest import open_request, waiting_run
from tests.approvals.scale import add_requests

pytestmark = pytest.mark.django_db

FLOWS = 3


@pytest.fixture
def ann(db, settings):
    settings.APPROVALS_BASE_URL = "http://testserver"
    ann = User.objects.create_user("ann", email="ann@example.com")
    ann.groups.add(Group.objects.get_or_create(name="approvers")[0])
    return ann


@pytest.fixture
def template(ann):
    """A waiting test-approval run's pending request, the one add_requests copies."""
    return open_request(waiting_run())


@pytest.fixture
def headers(ann):
    workflows = ["test-approval", *(f"scale-wf-{i}" for i in range(FLOWS))]
    _, plaintext = token_create(name="ann", workflows=workflows, acting_user=ann)
    return {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}


def _pending(template, count: int) -> list[int]:
    """`count` pending requests ann may decide (the template's among them, the rest copies
    on workflows of names only), their ids in the inbox's order (_tied)."""
    add_requests(template, pending=count - 1, workflows=FLOWS)
    return _tied(count)


def _tied(count: int) -> list[int]:
    """The `count` pending requests given due and asked times that tie in runs (so the
    order falls to the asked time, then to the id, across page boundaries); their ids in
    the inbox's order, as sorted here."""
    requests = list(ApprovalRequest.objects.filter(status=RequestStatus.PENDING)
                    .order_by("-pk"))
    assert len(requests) == count
    due, asked = requests[0].due_at, requests[0].requested_at
    for n, request in enumerate(requests):
        request.due_at = due + timedelta(minutes=n % 7)
        request.requested_at = asked - timedelta(minutes=(n // 7) % 3)
    ApprovalRequest.objects.bulk_update(requests, ["due_at", "requested_at"])
    return [r.pk for r in sorted(requests, key=lambda r: (r.due_at, r.requested_at, r.pk))]


def _page(client, headers, limit, after=None):
    query = {"limit": limit, **({"after": after} if after is not None else {})}
    response = client.get("/api/approvals", query, **headers)
    assert response.status_code == 200, response.content
    body = response.json()
    return [r["id"] for r in body["requests"]], body["next_cursor"]


def _walk(client, headers, limit, after=None, *, between=None) -> tuple[list[int], int]:
    """The ids of every page from `after` on, and how many pages; `between(seen)` runs
    after the first page."""
    seen, pages = [], 0
    while True:
        ids, after = _page(client, headers, limit, after)
        seen += ids
        pages += 1
        assert after is None or len(ids) == limit
        if after is None:
            return seen, pages
        if between is not None and pages == 1:
            between(seen)
        assert pages < 100, "the cursor does not move on"


def test_every_pending_request_is_seen_once_in_the_inbox_order(client, headers, template):
    expected = _pending(template, 250)

    seen, pages = _walk(client, headers, 40)

    assert seen == expected
    assert len(set(seen)) == len(seen) == 250
    assert pages == 7  # six of 40, the last one of 10 with next_cursor null


def test_a_list_that_fits_a_page_ends_at_once(client, headers, template):
    expected = _pending(template, 5)
    assert _page(client, headers, 5) == (expected, None)
    assert _page(client, headers, 200) == (expected, None)
    # Without a limit, a page of 200 as the list always held.
    assert client.get("/api/approvals", **headers).json()["requests"][-1]["id"] == expected[-1]


def _decide(client, headers, request_id):
    response = client.post(f"/api/approvals/{request_id}/decision",
                           {"approve": True, "decision_id": str(uuid.uuid4())},
                           content_type="application/json", **headers)
    assert response.status_code == 200, response.content


def test_a_request_decided_between_pages_makes_the_next_page_skip_none(client, headers,
                                                                       template):
    # Runs of a registered workflow, each waiting for its request: decided for real.
    for _ in range(29):
        waiting_run()
    open_request(waiting_run())
    expected = _tied(31)
    decided = []

    def decide_two(seen):
        # The request the cursor was taken from, and the first of the next page: an
        # offset would then start the next page two requests too far.
        decided.extend([seen[-1], expected[len(seen)]])
        for request_id in decided:
            _decide(client, headers, request_id)

    seen, pages = _walk(client, headers, 10, between=decide_two)

    assert ApprovalRequest.objects.filter(pk__in=decided, status="approved").count() == 2
    assert seen == [pk for pk in expected if pk != decided[1]]
    assert len(set(seen)) == len(seen) and pages == 3


def _queries(client, headers, after=None) -> tuple[int, str | None]:
    with CaptureQueriesContext(connection) as ctx:
        ids, cursor = _page(client, headers, 20, after)
    assert len(ids) == 20
    return len(ctx), cursor


def test_a_page_costs_the_same_queries_among_250_requests_as_among_50(client, headers,
                                                                      template):
    _pending(template, 50)
    _page(client, headers, 20)  # the token's first use of the minute writes its last_used_at
    first_small, cursor = _queries(client, headers)
    next_small, _ = _queries(client, headers, cursor)

    add_requests(template, pending=200, workflows=FLOWS)
    assert ApprovalRequest.objects.filter(status=RequestStatus.PENDING).count() == 250
    first_large, cursor = _queries(client, headers)
    next_large, _ = _queries(client, headers, cursor)

    assert first_large == first_small
    assert next_large == next_small == first_small


@pytest.mark.parametrize("after", [
    "garbage", "1700000000000000.5",  # a runs list's cursor: another list's place
    "1.2.3.4", "1.2.0", "1.2.3\n", "٣.1.1", "1.2.9999999999999999999",
    "123456789012345678.1.1", "2026-01-01T00:00:00+00:00|1",
])
def test_an_after_that_is_no_inbox_cursor_is_refused_naming_it(client, headers, template,
                                                                after):
    response = client.get("/api/approvals", {"after": after}, **headers)
    assert response.status_code == 422, response.content
    body = response.json()
    assert body["errors"][0]["loc"] == ["query", "after"] and "requests" not in body


@pytest.mark.parametrize("limit", ["0", "201", "-1", "many"])
def test_a_limit_out_of_bounds_is_refused_naming_it(client, headers, template, limit):
    response = client.get("/api/approvals", {"limit": limit}, **headers)
    assert response.status_code == 422, response.content
    body = response.json()
    assert body["errors"][0]["loc"] == ["query", "limit"] and "requests" not in body


def test_any_cursor_of_the_documented_shape_is_a_place_in_the_inbox(client, headers,
                                                                    template):
    expected = _pending(template, 3)
    assert _page(client, headers, 10, "0.0.1") == (expected, None)
    assert _page(client, headers, 10, "99999999999999999.99999999999999999.1") == ([], None)
