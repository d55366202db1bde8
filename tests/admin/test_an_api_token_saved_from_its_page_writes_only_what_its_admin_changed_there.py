"""An API token saved from its admin page writes what the person changed on that page, and
nothing else of what the page read. The page's save wrote the token whole, as the page read
it: a revocation committed since the page was shown (or while the save waited for the row)
was written back as "not revoked", and the revoked token worked again; its last use was set
back, and a workflow another admin had taken away from it was given back.

A token revoked since the page was shown is refused, in words, with nothing written. A
workflow is saved as the token holds it now, with those this person ticked and without
those they unticked; a field changed both here and by someone else since is refused.

The page is loaded and posted as a browser does: every field of its form, as rendered, with
the one the person changes."""

import threading
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.utils import timezone

from api.models import ApiToken
from api.tokens import clock, token_check, token_create, token_revoke, token_save
from audit.access import AccessAction, verify_access_chain
from audit.models import AccessRecord
from audit.page_edits import CHANGED_BEHIND_THE_PAGE
from tests.approvals.run_lock_order import blocked_on_a_lock, session

from .change_pages import form_of, shown_form

FORM = "apitoken_form"


def page_url(token) -> str:
    return f"/admin/api/apitoken/{token.pk}/change/"


def page(client, token) -> dict:
    fields = shown_form(client, page_url(token), FORM)
    assert {"workflows", "rate_limit", "expires_at_0"} <= fields.keys()
    return fields


def post(client, token, fields: dict):
    return client.post(page_url(token), fields)


def other_admin():
    return User.objects.get_or_create(username="other", is_superuser=True, is_staff=True)[0]


def another_admins_save(token, field: str, value) -> None:
    """What another admin's save of their own page commits: `field` changed."""
    copy = ApiToken.objects.get(pk=token.pk)
    setattr(copy, field, value)
    token_save(copy, by=other_admin(), changed=[field])


def stored(token) -> ApiToken:
    return ApiToken.objects.get(pk=token.pk)


def errors(response) -> str:
    form = response.context["adminform"].form
    return " ".join(str(e) for e in [*form.non_field_errors(),
                                      *(e for es in form.errors.values() for e in es)])


@pytest.fixture
def root(client):
    user = User.objects.create_superuser("root", "root@example.com", "x")
    client.force_login(user)
    return user


@pytest.fixture
def erp(root):
    token, plaintext = token_create(name="erp", workflows=["test-orders", "test-saga"],
                                    created_by=root)
    token.plaintext = plaintext
    return token


@pytest.mark.django_db
def test_a_token_revoked_after_its_page_was_shown_stays_revoked(client, erp):
    fields = page(client, erp)
    assert token_revoke(erp, by=other_admin())
    recorded = AccessRecord.objects.count()

    response = post(client, erp, {**fields, "rate_limit": ["50"]})

    assert response.status_code == 200
    said = errors(response)
    assert "Token erp was revoked at" in said and "by other" in said
    assert "nothing was saved" in said
    token = stored(erp)
    assert token.revoked_at is not None and token.revoked_by.username == "other"
    assert token.rate_limit is None
    assert token_check(erp.plaintext).problem == "token revoked"
    assert AccessRecord.objects.count() == recorded


IN_AN_HOUR = "in an hour"

# (the field another admin changes behind the page, its value; what this page's person
# changes, as posted; the field's value and the token's workflows once saved).
CASES = {
    "a workflow taken away behind, the rate limit here": (
        ("workflows", ["test-orders"]), ("rate_limit", ["50"]),
        (50, ["test-orders"])),
    "the rate limit behind, a workflow added here": (
        ("rate_limit", 10), ("workflows", ["test-orders", "test-saga", "test-approval"]),
        (10, ["test-approval", "test-orders", "test-saga"])),
    "a workflow taken away behind, another added here": (
        ("workflows", ["test-orders"]),
        ("workflows", ["test-orders", "test-saga", "test-approval"]),
        (None, ["test-approval", "test-orders"])),
    "a workflow added behind, one taken away here": (
        ("workflows", ["test-approval", "test-orders", "test-saga"]),
        ("workflows", ["test-orders"]),
        (None, ["test-approval", "test-orders"])),
    "the expiry behind, the rate limit here": (
        ("expires_at", IN_AN_HOUR), ("rate_limit", ["50"]), (50, ["test-orders", "test-saga"])),
}


@pytest.mark.django_db
@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_a_field_changed_behind_the_page_keeps_the_other_admins_value(client, erp, case):
    (behind, theirs), (mine, posted), (rate_limit, workflows) = case
    if theirs == IN_AN_HOUR:
        theirs = clock().replace(microsecond=0) + timedelta(hours=1)
    fields = page(client, erp)
    another_admins_save(erp, behind, theirs)
    before = AccessRecord.objects.order_by("-seq").first().after

    response = post(client, erp, {**fields, mine: posted})

    assert response.status_code == 302, errors(response)
    token = stored(erp)
    if behind != "workflows":
        assert getattr(token, behind) == theirs  # the other admin's change stands
    assert (token.rate_limit, token.workflows) == (rate_limit, workflows)
    # The access chain says what was written, by this person: the scope as it was after
    # the other admin's save, and as it is now.
    latest = AccessRecord.objects.order_by("-seq").first()
    assert latest.action == AccessAction.API_TOKEN_SCOPE_CHANGED
    assert latest.actor_label == "root" and latest.before == before
    assert latest.after["workflows"] == workflows
    assert latest.after["rate_limit"] == rate_limit
    assert verify_access_chain(AccessRecord.objects.order_by("seq")) is None


@pytest.mark.django_db
def test_a_field_changed_here_and_behind_the_page_is_refused(client, erp):
    fields = page(client, erp)
    another_admins_save(erp, "rate_limit", 10)

    response = post(client, erp, {**fields, "rate_limit": ["20"]})

    assert response.status_code == 200
    assert CHANGED_BEHIND_THE_PAGE in errors(response)
    assert stored(erp).rate_limit == 10


@pytest.mark.django_db
def test_a_page_shown_again_with_an_error_still_posts_the_expiry_it_first_showed(client,
                                                                                  erp):
    """The expiry is a date and a time, two inputs: shown again, the page held what was
    posted as what was shown, and the new expiry was taken for no change on the next post
    (the token kept the expiry this person meant to end it at)."""
    fields = page(client, erp)
    soon = timezone.localtime(clock() + timedelta(hours=1)).replace(microsecond=0)
    mine = {"expires_at_0": [f"{soon:%Y-%m-%d}"], "expires_at_1": [f"{soon:%H:%M:%S}"]}

    # Refused for a rate limit that is no number...
    refused = post(client, erp, {**fields, **mine, "rate_limit": ["fifty"]})
    assert refused.status_code == 200 and "rate_limit" in refused.context[
        "adminform"].form.errors
    # ...and posted again with it left as it was: the expiry is still this person's change.
    response = post(client, erp, {**form_of(refused.text, FORM), "rate_limit": [""]})

    assert response.status_code == 302, errors(response)
    assert stored(erp).expires_at == soon


def holds_the_row(token):
    """Another session holding the token's row (FOR KEY SHARE: a revoke or a use, which
    change no key, are not held up by it; a save's FOR UPDATE is)."""
    holder = session()
    holder.execute("SELECT id FROM api_apitoken WHERE id = %s FOR KEY SHARE", [token.pk])
    return holder


def saved_while(client, token, fields: dict, meanwhile):
    """The page's post, sent as `meanwhile` commits: the post waits for the token's row,
    which another session holds, and `meanwhile` is done then; the row is let go, and the
    post goes on. Its response."""
    outcome = {}

    def saving():
        try:
            outcome["save"] = post(client, token, fields)
        except Exception as exc:  # what the thread ended in, asserted below
            outcome["save"] = exc
        finally:
            connection.close()

    holder = holds_the_row(token)
    try:
        thread = threading.Thread(target=saving, daemon=True)
        thread.start()
        assert blocked_on_a_lock(60)
        meanwhile()
    finally:
        holder.commit()
        holder.close()
    thread.join(60)
    response = outcome["save"]
    assert not isinstance(response, Exception), response
    return response


@pytest.fixture
def racing():
    """A token, and a client signed in as a superuser, outside the test's transaction: the
    post is sent from a session of its own."""
    root = User.objects.create_superuser("root", "root@example.com", "x")
    token, plaintext = token_create(name="erp", workflows=["test-orders"], created_by=root)
    token.plaintext = plaintext
    client = Client()
    client.force_login(root)
    return client, token


@pytest.mark.django_db(transaction=True)
def test_a_token_revoked_while_its_save_waits_for_the_row_stays_revoked(racing):
    client, token = racing
    fields = page(client, token)

    response = saved_while(client, token, {**fields, "rate_limit": ["50"]},
                           lambda: token_revoke(token, by=other_admin()))

    assert response.status_code == 200
    assert "Token erp was revoked at" in errors(response)
    assert stored(token).revoked_at is not None and stored(token).rate_limit is None
    assert token_check(token.plaintext).problem == "token revoked"
    assert [r.action for r in AccessRecord.objects.order_by("seq")] == [
        AccessAction.API_TOKEN_CREATED, AccessAction.API_TOKEN_REVOKED]


@pytest.mark.django_db(transaction=True)
def test_a_tokens_use_while_its_save_waits_for_the_row_is_not_set_back(racing):
    client, token = racing
    fields = page(client, token)
    used = {}

    def use():
        used["token"] = token_check(token.plaintext).token

    response = saved_while(client, token, {**fields, "rate_limit": ["50"]}, use)

    assert response.status_code == 302, errors(response)
    assert used["token"] is not None
    assert (stored(token).rate_limit, stored(token).last_used_at) == (
        50, used["token"].last_used_at)
