"""An admin action runs on the rows its form's selection names (`_selected_action`), which
Django reads as ids as sent. A hand-edited selection naming what no row has as its id (past
what a bigint holds, "abc", a NUL, "1e400") does nothing, on any admin, and says which values
are no id: SQLite refused the number as the action read its rows (OverflowError), and both
databases refused the others as the rows were filtered (ValueError), each a server error.
Marked demo_database: make test runs these on SQLite too."""

import pytest
from django.contrib import messages
from django.contrib.auth.models import Group, User

from api.models import ApiToken
from api.tokens import token_create
from audit.admin import SELECTION_REFUSED
from audit.models import AccessRecord

pytestmark = [pytest.mark.django_db, pytest.mark.demo_database]

NO_IDS = [str(2**64), "abc", "\x00", "1e400"]


@pytest.fixture
def root(client):
    user = User.objects.create_superuser("root", "root@example.com", "x")
    client.force_login(user)
    client.raise_request_exception = False
    return user


def act(client, address: str, action: str, selected: list, **more) -> list:
    response = client.post(address, {"action": action, "index": 0,
                                     "_selected_action": selected, **more}, follow=True)
    assert response.status_code == 200, response.status_code
    assert response.redirect_chain == [(address, 302)]
    return [(m.level, str(m)) for m in response.context["messages"]]


def refused(*values) -> list:
    return [(messages.ERROR, SELECTION_REFUSED.format(
        values=", ".join(repr(v) for v in values), is_="is" if len(values) == 1 else "are"))]


@pytest.mark.parametrize("value", NO_IDS, ids=["past-a-bigint", "abc", "nul", "1e400"])
def test_revoking_a_token_selection_naming_no_id_revokes_nothing_and_says_so(
        client, root, value):
    token, _ = token_create(name="live", workflows=["test-orders"], created_by=root)
    recorded = AccessRecord.objects.count()
    assert act(client, "/admin/api/apitoken/", "revoke", [value]) == refused(value)
    assert ApiToken.objects.get(pk=token.pk).revoked_at is None
    assert AccessRecord.objects.count() == recorded


def test_a_selection_naming_a_row_and_no_id_does_nothing_to_the_row(client, root):
    token, _ = token_create(name="live", workflows=["test-orders"], created_by=root)
    assert act(client, "/admin/api/apitoken/", "revoke",
               [token.pk, "abc", str(2**64)]) == refused("abc", str(2**64))
    assert ApiToken.objects.get(pk=token.pk).revoked_at is None
    # The same selection without them revokes it.
    assert act(client, "/admin/api/apitoken/", "revoke", [token.pk]) == [
        (messages.SUCCESS, "1 token(s) revoked, 0 already revoked.")]


@pytest.mark.parametrize("value", [str(2**64), "abc"])
@pytest.mark.parametrize("address", ["/admin/auth/user/", "/admin/auth/group/"])
def test_deleting_a_selection_naming_no_id_deletes_nothing_and_says_so(
        client, root, address, value):
    Group.objects.create(name="operators-test")
    users, groups = User.objects.count(), Group.objects.count()
    # The confirmation page, then the confirmation itself (no index).
    assert act(client, address, "delete_selected", [value]) == refused(value)
    response = client.post(address, {"action": "delete_selected", "post": "yes",
                                     "_selected_action": [value]}, follow=True)
    assert response.status_code == 200
    assert [(m.level, str(m)) for m in response.context["messages"]] == refused(value)
    assert (User.objects.count(), Group.objects.count()) == (users, groups)
