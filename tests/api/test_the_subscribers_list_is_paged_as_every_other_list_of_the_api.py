"""GET /api/subscribers answers a page at a time, as GET /api/runs and GET /api/approvals
do: `limit` of them (at most MOST_A_PAGE), the oldest made first, with `next_cursor` to pass
as `after` for the next page, null on the last. Paging on with it lists each subscriber of
the token's workflows once and no other; one made between two pages comes at the end, and
one deleted makes the next page skip no other. An `after` of another shape, a `limit`
beyond the most a page holds, is refused with 422, never answered with the first page."""

import pytest
from django.contrib.auth.models import Permission, User

from api.models import WebhookSubscriber
from api.selectors import MOST_A_PAGE
from api.subscribers import subscriber_create
from api.tokens import token_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def keeper(client):
    """A superuser's token for test-orders and test-saga, acting for a person who may view
    subscribers."""
    boss = User.objects.create_superuser("boss")
    person = User.objects.create_user("keeper")
    person.user_permissions.add(Permission.objects.get(
        content_type__app_label="api", codename="view_webhooksubscriber"))
    _, plaintext = token_create(name="erp", workflows=["test-orders", "test-saga"],
                                acting_user=person, created_by=boss)
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {plaintext}"
    return boss


def _made(boss, name: str, workflows: list[str]) -> WebhookSubscriber:
    subscriber = WebhookSubscriber(name=name, url=f"https://{name}.example.com/hook",
                                   secret="whsec-paging-test-secret-0001", workflows=workflows)
    subscriber_create(subscriber, by=boss)
    return subscriber


def _all_pages(client, limit: int) -> tuple[list[str], int]:
    names, after, pages = [], "", 0
    while True:
        response = client.get("/api/subscribers", {"limit": limit, **(
            {"after": after} if after else {})})
        assert response.status_code == 200, response.content
        body = response.json()
        assert len(body["subscribers"]) <= limit
        names += [s["name"] for s in body["subscribers"]]
        pages += 1
        if body["next_cursor"] is None:
            return names, pages
        after = body["next_cursor"]


def test_paging_on_lists_each_subscriber_of_the_tokens_workflows_once(client, keeper):
    mine = [_made(keeper, f"sub-{i}", ["test-orders"] if i % 2 else ["test-saga",
                                                                      "test-orders"])
            for i in range(5)]
    _made(keeper, "other", ["test-agent"])  # of a workflow not the token's
    _made(keeper, "everything", [])  # every workflow: beyond any token

    names, pages = _all_pages(client, limit=2)

    assert names == [s.name for s in mine]
    assert pages == 3
    first = client.get("/api/subscribers").json()
    assert [s["name"] for s in first["subscribers"]] == names
    assert first["next_cursor"] is None


def test_a_subscriber_made_or_deleted_between_two_pages_moves_no_other(client, keeper):
    made = [_made(keeper, f"sub-{i}", ["test-orders"]) for i in range(4)]
    page = client.get("/api/subscribers", {"limit": 2}).json()
    assert [s["name"] for s in page["subscribers"]] == ["sub-0", "sub-1"]

    made[1].delete()
    _made(keeper, "sub-new", ["test-orders"])
    rest = client.get("/api/subscribers", {"limit": 2, "after": page["next_cursor"]}).json()
    assert [s["name"] for s in rest["subscribers"]] == ["sub-2", "sub-3"]
    last = client.get("/api/subscribers", {"limit": 2, "after": rest["next_cursor"]}).json()
    assert ([s["name"] for s in last["subscribers"]], last["next_cursor"]) == (["sub-new"],
                                                                                None)


@pytest.mark.parametrize("query", [{"after": "sub-1"}, {"after": "1.2.3"},
                                   {"limit": MOST_A_PAGE + 1}, {"limit": 0}])
def test_a_cursor_of_another_shape_or_a_limit_out_of_range_is_refused(client, keeper, query):
    _made(keeper, "sub-0", ["test-orders"])
    response = client.get("/api/subscribers", query)
    assert response.status_code == 422, response.content
    assert [e["loc"][-1] for e in response.json()["errors"]] == list(query)
