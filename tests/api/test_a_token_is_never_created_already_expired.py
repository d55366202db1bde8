"""A new API token expires in the future or never: one whose expiry has passed is refused,
in the admin's form with an error on the expiry field and by token_create, and nothing is
written (no token, no record in the access chain). An existing token stays editable."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from api.models import ApiToken
from api.tokens import ExpiryPassed, token_create
from audit.models import AccessRecord

pytestmark = pytest.mark.django_db


def _written():
    return ApiToken.objects.count(), AccessRecord.objects.count()


def _expiry(moment) -> dict:
    return {"expires_at_0": f"{moment:%Y-%m-%d}", "expires_at_1": f"{moment:%H:%M:%S}"}


@pytest.fixture
def admin_client(client):
    client.force_login(User.objects.create_superuser("root", password="pw"))
    return client


@pytest.mark.parametrize("ago", [timedelta(days=1), timedelta(seconds=2)])
def test_the_admin_form_refuses_an_expiry_already_passed_on_its_field(admin_client, ago):
    before = _written()
    response = admin_client.post("/admin/api/apitoken/add/", {
        "name": "erp-prod", "workflows": ["test-orders"], "rate_limit": "",
        **_expiry(timezone.now() - ago)})
    assert response.status_code == 200  # the form again, not the token shown once
    form = response.context["adminform"].form
    assert list(form.errors) == ["expires_at"]
    assert "has already passed" in form.errors["expires_at"][0]
    assert b"has already passed" in response.content
    assert b"dwf_" not in response.content
    assert _written() == before


def test_the_admin_form_takes_an_expiry_to_come(admin_client):
    response = admin_client.post("/admin/api/apitoken/add/", {
        "name": "erp-prod", "workflows": ["test-orders"], "rate_limit": "",
        **_expiry(timezone.now() + timedelta(hours=1))})
    assert response.status_code == 200
    assert ApiToken.objects.filter(name="erp-prod").exists()


def test_token_create_refuses_an_expiry_already_passed_and_writes_nothing():
    now = timezone.now()
    before = _written()
    for expiry in (now - timedelta(days=1), now):
        with pytest.raises(ExpiryPassed, match="has already passed"):
            token_create(name="erp", workflows=["test-orders"], expires_at=expiry, now=now)
    assert _written() == before
    token, _ = token_create(name="erp", workflows=[], expires_at=now + timedelta(seconds=1),
                            now=now)
    assert token.expires_at == now + timedelta(seconds=1)


def test_an_expired_token_can_still_be_edited_in_admin(admin_client):
    now = timezone.now()
    token, _ = token_create(name="erp", workflows=["test-orders"],
                            expires_at=now + timedelta(minutes=1), now=now)
    past = (now - timedelta(days=1)).replace(microsecond=0)
    ApiToken.objects.filter(pk=token.pk).update(expires_at=past)
    response = admin_client.post(f"/admin/api/apitoken/{token.pk}/change/", {
        "workflows": ["test-orders"], "rate_limit": "5", **_expiry(past)})
    assert response.status_code == 302, response.content
    token.refresh_from_db()
    assert (token.rate_limit, token.expires_at) == (5, past)
