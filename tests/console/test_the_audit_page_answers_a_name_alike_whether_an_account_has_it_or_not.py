"""The audit page filtered by an actor's name answers alike whether or not an account has
that name, when no record the viewer may see carries it: the same page, note, pager and
export, so filtering by names does not tell anyone who may open the page which usernames
exist. The page used to read an account's name along the person index and any other name
a window at a time, saying "No person has this name". Nor does a person's record on a
workflow the viewer may not see tell them the name is a person's."""

import re

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone

from audit import selectors
from audit.models import AuditRecord
from tests.admin.scale import bulk_runs

pytestmark = pytest.mark.django_db

# A person with an account and no record; one whose records are all on test-saga; a name
# no account has. The same length, so that the pages can be compared byte for byte.
ACCOUNT_ONLY, ON_SAGA_ONLY, NO_ACCOUNT = "bob.kowal", "dave.saga", "nobody.xy"
# The tokens a page carries that differ at each request (CSRF, the CSP nonce).
PER_REQUEST = re.compile(r"[A-Za-z0-9+/_-]{22,}")


@pytest.fixture(autouse=True)
def log(monkeypatch):
    """A log longer than the window a page reads when no index holds a name: the system's
    records on test-orders, and dave.saga's on test-saga."""
    monkeypatch.setattr(selectors, "SCAN_WINDOW", 4)
    User.objects.create_user(ACCOUNT_ONLY)
    User.objects.create_user(ON_SAGA_ONLY)
    orders = bulk_runs(["k-1"])[0]
    saga = bulk_runs(["k-2"], workflow="test-saga")[0]
    now = timezone.now()
    AuditRecord.objects.bulk_create(
        [AuditRecord(run=saga, seq=1, action="resumed", actor_kind="user",
                     actor_label=ON_SAGA_ONLY, created_at=now, prev_hash="p", hash="h")]
        + [AuditRecord(run=orders, seq=seq, action="succeeded", actor_kind="system",
                       actor_label="host:1", created_at=now, prev_hash="p", hash="h")
           for seq in range(1, 13)])


def _answer(client, name: str, **query) -> tuple:
    page = client.get(reverse("console:audit"), {"actor": name, **query})
    assert page.status_code == 200
    shown = PER_REQUEST.sub("TOKEN", page.content.decode().replace(name, "NAME"))
    export = client.get(reverse("console:audit"), {"actor": name, "format": "csv"})
    rows = b"".join(export.streaming_content).decode().splitlines()
    return (shown, list(page.context["records"]), page.context["next_before"],
            page.context["read_back_to"], rows)


def _pages(client, name: str) -> list[tuple]:
    """Each page of the filter, following Older to the end."""
    pages = [_answer(client, name)]
    while pages[-1][2]:
        assert len(pages) < 20, "the pages never end"
        pages.append(_answer(client, name, before=pages[-1][2]))
    return pages


def test_a_username_and_a_name_no_account_has_get_the_same_answer(client_for, auditor):
    client = client_for(auditor)
    account, no_account = _pages(client, ACCOUNT_ONLY), _pages(client, NO_ACCOUNT)

    assert account == no_account
    # Neither is told apart from the other by a note, nor lists a record.
    assert all(records == [] for _, records, _, _, _ in account)
    assert "No person has this name" not in account[0][0]
    # Both read a window a page, as any name on no record the viewer sees.
    assert len(account) > 1 and "this one stopped at record" in account[0][0]


def test_a_person_seen_only_on_workflows_one_may_not_see_is_no_person_to_them(
        client_for, finance_operator):
    client = client_for(finance_operator)
    pages = {name: _pages(client, name) for name in (ACCOUNT_ONLY, ON_SAGA_ONLY, NO_ACCOUNT)}

    assert pages[ACCOUNT_ONLY] == pages[ON_SAGA_ONLY] == pages[NO_ACCOUNT]
    assert all(records == [] for _, records, _, _, _ in pages[ON_SAGA_ONLY])
