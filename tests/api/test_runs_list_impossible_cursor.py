"""GET /api/runs with a cursor shaped like a time but naming no date (month 99) is a
malformed cursor like any other: the same answer as for garbage, never a 500."""

import pytest
from django.contrib.auth.models import User

from api.tokens import token_create
from tests.factories import new_run

pytestmark = pytest.mark.django_db


def test_a_cursor_with_an_impossible_date_is_answered_like_a_malformed_one(client):
    new_run()
    _, plaintext = token_create(name="ops", workflows=["test-orders"],
                                acting_user=User.objects.create_superuser("boss"))
    headers = {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}
    garbage = client.get("/api/runs", {"after": "garbage"}, **headers)
    impossible = client.get("/api/runs", {"after": "2026-99-99T00:00:00|1"}, **headers)
    assert impossible.status_code == garbage.status_code < 500
    assert impossible.json() == garbage.json()
