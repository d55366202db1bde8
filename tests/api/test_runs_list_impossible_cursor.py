"""GET /api/runs refuses an `after` that is not a cursor it handed out (garbage, a date
that names no day, an id no bigint holds) with a 422 naming `after`: a client paging on
with it would otherwise be handed the first page again, and loop."""

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
                                   "2026-01-01T00:00:00+00:00|99999999999999999999",
                                   "2026-01-01T00:00:00+00:00|9999999999999999999",
                                   "2026-01-01T00:00:00+00:00|٣"])
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
