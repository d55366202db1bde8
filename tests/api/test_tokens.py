"""API tokens: created by admins and shown once, stored hashed, scoped to workflows,
revocable, expiring, last use recorded; the API opens to tokens only and tokens open nothing
else."""

import hashlib
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from api.models import ApiToken
from api.tokens import token_check, token_create, token_revoke, tokens_expiring_soon
from tests.api.conftest import post_run
from tests.api.test_metrics import scrape, value
from tests.factories import new_run

pytestmark = pytest.mark.django_db

ORDER = {"workflow": "test-orders", "business_key": "k-1", "input": {"order": "o-1"}}


def _bearer(plaintext):
    return {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}


def test_the_plaintext_is_stored_nowhere_only_its_sha256(make_token):
    token, plaintext = make_token()
    row = ApiToken.objects.filter(pk=token.pk).values().get()
    assert plaintext not in repr(row)
    secret = plaintext.split("_", 2)[2]
    assert secret not in repr(row)
    assert row["hashed"] == hashlib.sha256(plaintext.encode()).hexdigest()
    assert plaintext.startswith(f"dwf_{row['prefix']}_") and len(secret) >= 43


def test_a_wrong_secret_with_a_real_prefix_is_refused(make_token):
    _, plaintext = make_token()
    forged = plaintext[:-4] + ("AAAA" if not plaintext.endswith("AAAA") else "BBBB")
    assert token_check(forged).token is None
    assert token_check(plaintext).token is not None


@pytest.mark.parametrize("header", [None, "Bearer", "Bearer dwf_nope_nope", "Basic dXNlcjpwdw==",
                                    "Token abc"])
def test_without_a_valid_token_the_api_answers_401(client, make_token, header):
    make_token()
    extra = {"HTTP_AUTHORIZATION": header} if header else {}
    for response in (post_run(client, ORDER, **extra), client.get("/api/runs/1", **extra)):
        assert response.status_code == 401
        assert response["WWW-Authenticate"] == "Bearer"
        assert response.json()["error"] == "unauthorized"


def test_a_revoked_token_is_refused_at_once(client, make_token):
    token, plaintext = make_token()
    assert post_run(client, ORDER, **_bearer(plaintext)).status_code == 201
    assert token_revoke(token)
    response = client.get("/api/runs/1", **_bearer(plaintext))
    assert response.status_code == 401 and response.json()["detail"] == "token revoked"
    assert not token_revoke(token)  # already revoked


def test_last_use_is_recorded(client, make_token):
    token, plaintext = make_token()
    assert token.last_used_at is None
    before = timezone.now()
    client.get("/api/runs/1", **_bearer(plaintext))
    token.refresh_from_db()
    assert token.last_used_at is not None and token.last_used_at >= before


def test_a_console_session_does_not_open_the_api(client, make_token):
    make_token()
    admin = User.objects.create_superuser("root", password="pw")
    client.force_login(admin)
    assert client.get("/runs/").status_code == 200  # the session works for the console
    assert post_run(client, ORDER).status_code == 401
    assert client.get("/api/runs/1").status_code == 401


def test_a_token_does_not_open_the_console_or_the_admin(client, make_token):
    _, plaintext = make_token()
    for path in ("/runs/", "/attention/", "/admin/"):
        response = client.get(path, **_bearer(plaintext))
        assert response.status_code == 302 and "login" in response["Location"], path


def test_a_token_reads_runs_of_its_workflows_only(client, make_token):
    _, orders_token = make_token("orders", workflows=["test-orders"])
    _, saga_token = make_token("saga", workflows=["test-saga"])
    run = new_run("test-saga")
    assert client.get(f"/api/runs/{run.pk}", **_bearer(saga_token)).status_code == 200
    response = client.get(f"/api/runs/{run.pk}", **_bearer(orders_token))
    # Not 403: a token does not learn that runs of other workflows exist.
    assert response.status_code == 404 and response.json()["error"] == "run_not_found"


def test_an_admin_creates_a_token_and_sees_it_exactly_once(client):
    admin = User.objects.create_superuser("root", password="pw")
    client.force_login(admin)
    form = client.get("/admin/api/apitoken/add/")
    assert form.status_code == 200 and b"test-orders" in form.content
    response = client.post("/admin/api/apitoken/add/", {
        "name": "erp-prod", "workflows": ["test-orders", "test-saga"], "rate_limit": ""})
    assert response.status_code == 200, response.content
    token = ApiToken.objects.get(name="erp-prod")
    plaintext = response.context["plaintext"]
    assert plaintext.encode() in response.content
    assert "no-store" in response["Cache-Control"]
    assert token.hashed == hashlib.sha256(plaintext.encode()).hexdigest()
    assert token.workflows == ["test-orders", "test-saga"] and token.created_by == admin
    # Never again: not on the token's page, not in the list, not in a message.
    for path in (f"/admin/api/apitoken/{token.pk}/change/", "/admin/api/apitoken/"):
        page = client.get(path)
        assert page.status_code == 200 and plaintext.encode() not in page.content
    # And it works.
    client.logout()
    assert post_run(client, ORDER, **_bearer(plaintext)).status_code == 201


def test_an_admin_revokes_tokens_and_cannot_delete_them(client, make_token):
    token, plaintext = make_token()
    admin = User.objects.create_superuser("root", password="pw")
    client.force_login(admin)
    response = client.post("/admin/api/apitoken/", {
        "action": "revoke", "_selected_action": [token.pk]}, follow=True)
    assert response.status_code == 200
    token.refresh_from_db()
    assert token.revoked_at is not None and token.revoked_by == admin
    assert client.get(f"/admin/api/apitoken/{token.pk}/delete/").status_code == 403
    client.logout()
    assert client.get("/api/runs/1", **_bearer(plaintext)).status_code == 401


def test_an_expired_token_is_refused_with_401_json(client):
    now = timezone.now()
    token, plaintext = token_create(name="erp", workflows=["test-orders"],
                                    expires_at=now + timedelta(minutes=5))
    assert post_run(client, ORDER, **_bearer(plaintext)).status_code == 201
    assert token_check(plaintext, now=now + timedelta(minutes=5)).problem == "token expired"
    ApiToken.objects.filter(pk=token.pk).update(expires_at=now - timedelta(seconds=1))
    for response in (post_run(client, {**ORDER, "business_key": "k-2"}, **_bearer(plaintext)),
                     client.get("/api/runs/1", **_bearer(plaintext))):
        assert response.status_code == 401
        assert response.json() == {"error": "unauthorized", "detail": "token expired"}
        assert response["WWW-Authenticate"] == "Bearer"


def test_a_new_token_expires_after_the_default_lifetime_unless_told_otherwise(settings):
    now = timezone.now()
    settings.API_TOKEN_DEFAULT_DAYS = 30
    token, _ = token_create(name="a", workflows=[], now=now)
    assert token.expires_at == now + timedelta(days=30)
    token, _ = token_create(name="b", workflows=[], expires_at=None, now=now)
    assert token.expires_at is None
    settings.API_TOKEN_DEFAULT_DAYS = None
    token, plaintext = token_create(name="c", workflows=[], now=now)
    assert token.expires_at is None
    assert token_check(plaintext, now=now + timedelta(days=3650)).token == token


def test_an_admin_sets_the_expiry_and_sees_the_default_prefilled(client, settings):
    settings.API_TOKEN_DEFAULT_DAYS = 30
    client.force_login(User.objects.create_superuser("root", password="pw"))
    form = client.get("/admin/api/apitoken/add/")
    initial = form.context["adminform"].form.fields["expires_at"].initial
    assert abs(initial - (timezone.now() + timedelta(days=30))) < timedelta(minutes=1)
    response = client.post("/admin/api/apitoken/add/", {
        "name": "erp-prod", "workflows": ["test-orders"], "rate_limit": "",
        "expires_at_0": "2031-01-02", "expires_at_1": "03:04:05"})
    assert response.status_code == 200, response.content
    token = ApiToken.objects.get(name="erp-prod")
    assert token.expires_at.isoformat() == "2031-01-02T03:04:05+00:00"
    assert b"It expires on 2031-01-02 03:04 UTC" in response.content
    # And an admin can change it later (here: clear it, for a token that never expires).
    change = client.post(f"/admin/api/apitoken/{token.pk}/change/", {
        "workflows": ["test-orders"], "rate_limit": "", "expires_at_0": "", "expires_at_1": ""})
    assert change.status_code == 302, change.content
    token.refresh_from_db()
    assert token.expires_at is None


def test_metrics_count_the_usable_tokens_expiring_within_seven_days(client):
    now = timezone.now()
    for name, expiry in [("soon", now + timedelta(days=6)), ("later", now + timedelta(days=8)),
                         ("never", None), ("past", now - timedelta(days=1)),
                         ("revoked-soon", now + timedelta(days=1))]:
        # No token is made expired (api.tokens.refuse_passed_expiry): "past" expires after.
        made = now + timedelta(days=1) if name == "past" else expiry
        token, _ = token_create(name=name, workflows=[], expires_at=made)
        if name == "past":
            ApiToken.objects.filter(pk=token.pk).update(expires_at=expiry)
        if name == "revoked-soon":
            token_revoke(token)
    assert tokens_expiring_soon(now) == 1
    assert value(scrape(client), "durable_api_tokens_expiring_soon") == 1
