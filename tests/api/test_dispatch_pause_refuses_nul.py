"""POST /api/workflows/{name}/dispatch/pause (and resume) refuses a NUL character, which
the database cannot store, in the reason or the system with 422: nothing is paused."""

import pytest
from django.contrib.auth.models import User

from api.tokens import token_create
from runs.machine import dispatch
from runs.models import DispatchPause

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_pauses():
    dispatch.forget_cache()
    yield
    dispatch.forget_cache()


@pytest.mark.parametrize("action", ["pause", "resume"])
@pytest.mark.parametrize(("body", "field"), [
    ({"reason": "a\x00b"}, "reason"),
    ({"reason": "INC-7", "system": "led\x00ger"}, "system"),
])
def test_a_nul_in_the_reason_or_the_system_is_refused_naming_it(client, action, body, field):
    boss = User.objects.create_superuser("boss")
    _, token = token_create(name="ops", workflows=["test-orders"], created_by=boss)
    response = client.post(f"/api/workflows/test-orders/dispatch/{action}", body,
                           content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 422, response.content
    assert [e["loc"] for e in response.json()["errors"]] == [[field]]
    assert not DispatchPause.objects.exists()
