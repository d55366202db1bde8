"""An address of the console or the approvals pages naming an id no row can have (past what a
bigint holds) is not found, on PostgreSQL and on the demo's SQLite alike, and changes
nothing: every id in a path is read by the converter `id` (runs.reads.id_in_path) before a
view runs. Django's `int` converter passed such an id on to the lookups, which SQLite
refuses with an OverflowError: on the demo the run page, its investigation, its transcripts
and its actions answered 500. Marked demo_database: make test runs these on SQLite too."""

import pytest
from django.contrib.auth.models import User
from django.urls import Resolver404, get_resolver, resolve
from django.urls.resolvers import URLPattern, URLResolver

from audit.models import AuditRecord
from runs.reads.id_in_path import LARGEST_ID

pytestmark = [pytest.mark.django_db, pytest.mark.demo_database]

PAST = str(LARGEST_ID + 1)  # 9223372036854775808
MUCH_PAST = "99999999999999999999"
ADDRESSES = [
    "/runs/{id}/", "/runs/{id}/investigation/", "/runs/{id}/transcripts/1/",
    "/runs/1/transcripts/{id}/", "/runs/archived/{id}/", "/runs/bulk/jobs/{id}/",
    "/approvals/{id}/",
]


@pytest.fixture
def superuser(client):
    user = User.objects.create_superuser("root", password="pw")
    client.force_login(user)
    return user


def _routes(resolver=None, prefix=""):
    for entry in (resolver or get_resolver()).url_patterns:
        if isinstance(entry, URLResolver):
            yield from _routes(entry, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            yield prefix + str(entry.pattern)


def test_no_console_or_approvals_address_reads_an_id_with_djangos_int_converter():
    console_routes = [r for r in _routes() if not r.startswith(("admin/", "api/"))]
    with_ids = [r for r in console_routes if "<id:" in r]
    assert "runs/<id:run_id>/" in with_ids and "approvals/<id:pk>/" in with_ids
    assert [r for r in console_routes if "<int:" in r] == []


@pytest.mark.parametrize("run_id", [PAST, MUCH_PAST])
@pytest.mark.parametrize("address", ADDRESSES)
def test_a_page_naming_an_id_past_a_bigint_is_not_found(client, superuser, address, run_id):
    assert client.get(address.format(id=run_id)).status_code == 404


@pytest.mark.parametrize("action", ["terminate", "resume", "retry_step"])
def test_an_action_on_an_id_past_a_bigint_is_not_found_and_writes_nothing(client, superuser,
                                                                         action):
    answer = client.post(f"/runs/{MUCH_PAST}/{action}/", {"reason": "cleanup", "seen": "1"})
    assert answer.status_code == 404
    assert AuditRecord.objects.count() == 0


def test_the_largest_id_a_row_can_have_reaches_the_run_page_which_finds_no_such_run(
        client, superuser):
    assert resolve(f"/runs/{LARGEST_ID}/").kwargs == {"run_id": LARGEST_ID}
    assert client.get(f"/runs/{LARGEST_ID}/").status_code == 404
    with pytest.raises(Resolver404):
        resolve(f"/runs/{PAST}/")
