"""GET /api/runs refuses an `after` that does not have a cursor's shape (garbage, the old
time|id form, an id no bigint holds) with a 422 naming `after`: a client paging on with it
would otherwise be handed the first page again, and loop. Every text of the documented
shape is a place in the list."""

import pytest
from django.contrib.auth.models import User

from api.tokens import token_create
from tests.factories import new_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def headers():
    _, plaintext = token_create(name="ops", workflows=["test-orders"],
                                acting_user=User.objects.create_superuser("boss"))
    return {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}


@pytest.mark.parametrize("after", ["garbage", "2026-99-99T00:00:00|1",
                                   "2026-01-01T00:00:00+00:00|1",
                                   "1700000000000000.9999999999999999999",
                                   "1700000000000000.0", "٣.1", "1.1\n"])
def test_an_after_that_is_no_cursor_is_refused_naming_it(client, headers, after):
    new_run()
    answer = client.get("/api/runs", {"after": after}, **headers)
    assert answer.status_code == 422
    body = answer.json()
    assert body["errors"][0]["loc"] == ["query", "after"] and "runs" not in body


def test_paging_with_the_handed_out_cursor_reaches_the_end(client, headers):
    made = {new_run().pk for _ in range(5)}
    seen, after = [], ""
    for _ in range(5):
        page = client.get("/api/runs", {"limit": 2, **({"after": after} if after else {})},
                          **headers).json()
        seen += [run["id"] for run in page["runs"]]
        after = page["next_cursor"]
        if not after:
            break
    assert set(seen) == made and len(seen) == len(made)


def test_any_cursor_of_the_documented_shape_is_a_place_in_the_list(client, headers):
    made = [new_run() for _ in range(3)]
    for after in ("0.1", "99999999999999999.999999999999999999"):
        answer = client.get("/api/runs", {"after": after}, **headers)
        assert answer.status_code == 200
    assert client.get("/api/runs", {"after": "0.1"}, **headers).json()["runs"] == []
    everything = client.get("/api/runs", {"after": "99999999999999999.999999999999999999"},
                            **headers).json()["runs"]
    assert sorted(run["id"] for run in everything) == sorted(run.pk for run in made)
