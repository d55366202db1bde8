"""A token that acts for a person is that person's credential: once the person is made
inactive (they left, or are suspended) it is refused with 401, reads and starts included,
and nothing is written; active again, it works again. A token that acts for nobody is not
touched by anyone's account."""

import pytest
from django.contrib.auth.models import User

from api.tokens import token_create
from runs.models import Run
from tests.api.conftest import post_run

pytestmark = pytest.mark.django_db

START = {"workflow": "test-orders", "business_key": "k-inactive", "input": {"order": "o"}}


def test_a_token_whose_acting_user_is_inactive_is_refused_and_starts_nothing(client):
    ghost = User.objects.create_user("ghost", password="pw")
    _, plaintext = token_create(name="erp", workflows=["test-orders"], acting_user=ghost)
    auth = {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}
    ghost.is_active = False
    ghost.save()

    listed = client.get("/api/runs", **auth)
    assert listed.status_code == 401
    assert listed.json()["detail"] == "token acts for an inactive user"
    started = post_run(client, START, **auth)
    assert started.status_code == 401 and not Run.objects.exists()

    ghost.is_active = True
    ghost.save()
    assert post_run(client, START, **auth).status_code == 201
    assert Run.objects.filter(business_key="k-inactive").count() == 1


def test_a_token_that_acts_for_nobody_starts_runs_whoever_is_inactive(client):
    User.objects.create_user("ghost", password="pw", is_active=False)
    _, plaintext = token_create(name="erp", workflows=["test-orders"])
    assert post_run(client, START, HTTP_AUTHORIZATION=f"Bearer {plaintext}").status_code == 201
