"""A webhook subscriber's secret signs each delivery, and its receiver holds the same secret
to check them. Django admin stripped the blanks around a secret typed there and kept it
changed, while the API kept them; and the API refused a short secret in pydantic's words
where admin said why (api.subscribers.secret_problem). Now one rule, asked in one place,
holds on both paths in the same words: a blank at either end is refused (never stripped: a
secret changed on our side would fail every signature the receiver checks), as is a secret
too short or too long; nothing is written or recorded. Blanks inside a secret are its own."""

import html
import re

import pytest

from api.models import WebhookSubscriber
from api.subscribers import (
    SECRET_MAX_LENGTH,
    SECRET_PATTERN,
    opened,
    sealed_secret,
    secret_problem,
)
from audit.models import AccessRecord
from tests.admin.test_admin_lists import admin_client  # noqa: F401 - the fixture
from tests.api.test_a_webhook_subscriber_is_made_changed_and_deleted_over_the_api_as_in_admin import (  # noqa: E501,F401
    keeper,
    send,
)

pytestmark = pytest.mark.django_db

SECRET = "whsec-only-the-receiver-4711"
REFUSED = [" " + SECRET, SECRET + " ", SECRET + "\n", "\u00a0" + SECRET, "   ", "s3c",
           "x" * (SECRET_MAX_LENGTH + 1), "enc:" + SECRET]
HOOK = {"name": "crm", "url": "https://crm.example.com/hook"}


def _admin_says(response) -> str:
    assert response.status_code == 200, response.status_code
    return html.unescape(response.content.decode())


def _sentence(problem: str) -> str:
    return f"{problem[0].upper()}{problem[1:]}."


def _api_refusal(response, secret: str) -> str:
    assert response.status_code == 422, response.content
    [error] = response.json()["errors"]
    assert error["loc"] == ["secret"] and error["type"] == "secret"
    if secret.strip():
        assert secret.strip() not in response.text
    return error["msg"]


@pytest.mark.parametrize("secret", REFUSED, ids=repr)
def test_a_new_subscribers_secret_is_refused_in_the_same_words_on_both_paths(
        client, keeper, admin_client, secret):  # noqa: F811
    problem = secret_problem(secret)
    assert problem is not None
    recorded = AccessRecord.objects.count()

    made = send(client, "POST", "/api/subscribers", {**HOOK, "secret": secret,
                                                     "workflows": ["test-orders"]})
    assert _api_refusal(made, secret) == problem

    page = admin_client.post("/admin/api/webhooksubscriber/add/", {
        **HOOK, "secret": secret, "workflows": "[]", "active": "on"})
    assert _sentence(problem) in _admin_says(page)

    assert not WebhookSubscriber.objects.exists()
    assert AccessRecord.objects.count() == recorded


@pytest.mark.parametrize("secret", [" " + SECRET, SECRET + "\t", "   "], ids=repr)
def test_a_new_secret_for_a_stored_subscriber_is_refused_and_the_stored_one_kept(
        client, keeper, admin_client, secret):  # noqa: F811
    stored = WebhookSubscriber.objects.create(**HOOK, secret=sealed_secret(SECRET),
                                              workflows=["test-orders"])
    recorded = AccessRecord.objects.count()
    problem = secret_problem(secret)
    assert problem.startswith("a secret may not begin or end with a space or another blank")

    changed = send(client, "PATCH", f"/api/subscribers/{stored.pk}", {"secret": secret})
    assert _api_refusal(changed, secret) == problem

    page = admin_client.post(f"/admin/api/webhooksubscriber/{stored.pk}/change/", {
        **HOOK, "secret": secret, "workflows": '["test-orders"]', "active": "on"})
    assert _sentence(problem) in _admin_says(page)

    stored = WebhookSubscriber.objects.get()
    assert opened(stored.secret) == SECRET and not stored.previous_secret
    assert AccessRecord.objects.count() == recorded


def test_a_new_secret_written_as_a_sealed_one_is_refused_not_taken_for_the_stored_one(
        client, keeper, admin_client):  # noqa: F811
    """A secret that begins as every sealed value does was taken for the stored one kept:
    the save kept the old secret and said nothing, so the receiver given the new one would
    fail every signature."""
    stored = WebhookSubscriber.objects.create(**HOOK, secret=sealed_secret(SECRET),
                                              workflows=["test-orders"])
    before = stored.secret
    recorded = AccessRecord.objects.count()
    typed = "enc:whsec-the-new-one-4712"
    problem = secret_problem(typed)
    assert problem is not None and "'enc:'" in problem

    changed = send(client, "PATCH", f"/api/subscribers/{stored.pk}", {"secret": typed})
    assert _api_refusal(changed, typed) == problem
    page = admin_client.post(f"/admin/api/webhooksubscriber/{stored.pk}/change/", {
        **HOOK, "secret": typed, "workflows": '["test-orders"]', "active": "on"})
    assert _sentence(problem) in _admin_says(page)

    stored = WebhookSubscriber.objects.get()
    assert stored.secret == before and opened(stored.secret) == SECRET
    assert not stored.previous_secret
    assert AccessRecord.objects.count() == recorded


def test_a_secret_with_blanks_inside_is_kept_as_given_on_both_paths(
        client, keeper, admin_client):  # noqa: F811
    secret = "whsec only the receiver 4711"
    made = send(client, "POST", "/api/subscribers", {**HOOK, "secret": secret,
                                                     "workflows": ["test-orders"]})
    assert made.status_code == 201, made.content
    page = admin_client.post("/admin/api/webhooksubscriber/add/", {
        "name": "crm-2", "url": HOOK["url"], "secret": secret, "workflows": "[]",
        "active": "on"})
    assert page.status_code == 302, page.content[:2000]
    assert [opened(s.secret) for s in WebhookSubscriber.objects.order_by("name")] == \
        [secret, secret]


def test_the_documents_pattern_refuses_exactly_the_blanks_the_rule_refuses():
    r"""The API's document says the rule as a pattern a client checks before sending: a
    character the pattern let through at either end and the rule refuses (\x85, \x1c) was
    a schema-valid secret answered 422. The pattern names its blanks: \s means another set
    in each engine (ECMA-262's, which the document's clients and schema validators use, has
    \ufeff and lacks \x85 and \x1c-\x1f; Python's follows str.isspace)."""
    assert r"\s" not in SECRET_PATTERN
    pattern = re.compile(SECRET_PATTERN.removeprefix("^").removesuffix("$"))
    for code in range(1, 0x10000):
        if 0xD800 <= code <= 0xDFFF:
            continue  # surrogates: no text a client can send
        for secret in ("s" * 16 + chr(code), chr(code) + "s" * 16):
            by_rule = secret_problem(secret) is None
            by_pattern = pattern.fullmatch(secret) is not None
            assert by_rule == by_pattern, (hex(code), by_rule, by_pattern)
