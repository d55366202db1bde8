"""Django admin takes a filter on any column from a list's address. A hand-edited one naming
what no row can hold (an id past what a bigint holds, a time past the year 9999 in UTC, "abc"
for an id, a year the date hierarchy cannot bound) is answered with the list without that
filter, its other filters kept, and a message naming it, on PostgreSQL and on the demo's
SQLite alike. SQLite refused such an id or time as the list was counted (OverflowError), the
date hierarchy failed on both (ValueError, OverflowError), and PostgreSQL refused a time
with an offset past 15:59 (a DataError): each was a server error. So was a regex or iregex
filter whose pattern the database cannot read, refused by either database as rows were
matched; it is judged by the database's own engine, reading no row. Marked demo_database:
make test runs these on SQLite too."""

from urllib.parse import quote

import pytest
from django.contrib.auth.models import User
from django.contrib.messages import get_messages
from django.utils import timezone
from django.utils.html import escape

from archive.models import ArchiveFile
from audit.admin import DATE_REFUSED, FILTER_REFUSED, PATTERN_REFUSED, shown
from runs.models import Run
from runs.reads.id_in_path import LARGEST_ID
from tests.factories import new_run

pytestmark = [pytest.mark.django_db, pytest.mark.demo_database]

PAST = str(2**64)  # 18446744073709551616
LAST_TIME = "9999-12-31T23:59:59-23:59"  # 10000-01-01T23:58:59 in UTC


@pytest.fixture
def admin_client(client):
    client.force_login(User.objects.create_superuser("root", "root@example.com", "x"))
    client.raise_request_exception = False
    return client


def refused_filter(name: str, value: str) -> str:
    return FILTER_REFUSED.format(filters=f"{name}={shown(value)}", that="that filter")


def answer(client, address: str):
    """Where `address` sends, and the messages it leaves."""
    response = client.get(address)
    assert response.status_code == 302, response.status_code
    return response["Location"], [str(m) for m in get_messages(response.wsgi_request)]


@pytest.mark.parametrize(("address", "name", "value"), [
    ("/admin/audit/auditrecord/?run={}", "run", PAST),
    ("/admin/audit/auditrecord/?run__gt={}", "run__gt", PAST),
    ("/admin/runs/run/?id__in={}", "id__in", PAST),
    ("/admin/runs/run/?id__in={}", "id__in", f"-{PAST}"),
    ("/admin/runs/run/?id__in={}", "id__in", "abc"),
    ("/admin/runs/run/?id={}", "id", PAST),
    ("/admin/runs/run/?id__range={}", "id__range", "1"),
    ("/admin/runs/run/?created_at__gte={}", "created_at__gte", LAST_TIME),
    ("/admin/audit/auditrecord/?created_at__lt={}", "created_at__lt",
     "0001-01-01T00:00:00+01:00"),
    ("/admin/runs/run/?created_at__year={}", "created_at__year", PAST),
    # In the calendar, but with an offset PostgreSQL refuses (a DataError there).
    ("/admin/runs/run/?created_at__gte={}", "created_at__gte", "2026-01-01T00:00:00+20:00"),
])
def test_a_filter_no_row_can_hold_gets_the_list_without_it_and_a_message_naming_it(
        admin_client, address, name, value):
    run = new_run()
    base = address.split("?")[0]
    location, said = answer(admin_client, address.format(quote(value)))
    assert (location, said) == (base, [refused_filter(name, value)])
    listed = admin_client.get(location)
    assert listed.status_code == 200
    assert escape(refused_filter(name, value)) in listed.text
    assert run in listed.context["cl"].result_list or base.startswith("/admin/audit/")


def test_the_lists_other_filters_and_search_are_kept(admin_client):
    run = new_run()
    location, said = answer(admin_client,
                            f"/admin/runs/run/?status={run.status}&id__in={PAST}&q=order-&p=2")
    assert location == f"/admin/runs/run/?status={run.status}&q=order-"
    assert said == [refused_filter("id__in", PAST)]
    assert list(admin_client.get(location).context["cl"].result_list) == [run]


def test_the_largest_id_a_row_can_have_is_still_a_filter(admin_client):
    new_run()
    location, _ = answer(admin_client, f"/admin/runs/run/?id__in={PAST}")
    kept = admin_client.get(f"{location}?id__in={LARGEST_ID},{Run.objects.get().pk}")
    assert kept.status_code == 200
    assert list(kept.context["cl"].result_list) == [Run.objects.get()]


def test_a_list_filters_parameter_past_a_bigint_is_refused_too(admin_client):
    # The webhook deliveries' filter by subscriber is Django's RelatedFieldListFilter.
    location, said = answer(admin_client,
                            f"/admin/api/webhookdelivery/?subscriber__id__exact={PAST}")
    assert (location, said) == ("/admin/api/webhookdelivery/",
                                [refused_filter("subscriber__id__exact", PAST)])


@pytest.mark.parametrize("query", [
    "created_at__year=9999", f"created_at__year={PAST}", f"created_at__year=-{PAST}",
    "created_at__year=9999&created_at__month=12",
    "created_at__year=9999&created_at__month=12&created_at__day=31",
])
def test_a_date_the_date_hierarchy_cannot_bound_gets_the_list_and_a_message_naming_it(
        admin_client, query):
    archive = ArchiveFile.objects.create(name="runs/a.jsonl.gz", sha256="a" * 64, size=1,
                                         run_count=1, record_count=1, heads={},
                                         created_at=timezone.now(), created_by="test")
    location, said = answer(admin_client, f"/admin/archive/archivefile/?{query}&q=runs")
    assert location == "/admin/archive/archivefile/?q=runs"
    asked = ", ".join(f"{name}={shown(value)}" for name, value in
                      (part.split("=") for part in query.split("&")))
    assert said == [DATE_REFUSED.format(filters=asked)]
    assert list(admin_client.get(location).context["cl"].result_list) == [archive]
    # The last year it bounds is still a filter.
    last = admin_client.get("/admin/archive/archivefile/?created_at__year=9999"
                            "&created_at__month=12&created_at__day=30")
    assert last.status_code == 200 and list(last.context["cl"].result_list) == []


def refused_pattern(name: str, value: str) -> str:
    return PATTERN_REFUSED.format(filters=f"{name}={shown(value)}", is_="is",
                                  that="that filter")


@pytest.mark.parametrize(("address", "name", "value"), [
    ("/admin/runs/run/?id__regex={}", "id__regex", "("),
    ("/admin/runs/run/?business_key__iregex={}", "business_key__iregex", "[a"),
    ("/admin/runs/run/?business_key__regex={}", "business_key__regex", "a{2,1}"),
    ("/admin/audit/auditrecord/?reason__regex={}", "reason__regex", "*"),
])
def test_a_filter_by_a_malformed_regular_expression_gets_the_list_without_it_and_a_message(
        admin_client, address, name, value):
    run = new_run()
    base = address.split("?")[0]
    location, said = answer(admin_client, f"{address.format(quote(value))}&id__gt=0")
    assert (location, said) == (f"{base}?id__gt=0", [refused_pattern(name, value)])
    listed = admin_client.get(location)
    assert listed.status_code == 200
    assert escape(refused_pattern(name, value)) in listed.text
    assert run in listed.context["cl"].result_list or base.startswith("/admin/audit/")
    # A pattern the database reads is still a filter, on the same column.
    kept = admin_client.get(f"{base}?{name}=.")
    assert kept.status_code == 200 and not list(get_messages(kept.wsgi_request))
    assert run in kept.context["cl"].result_list or base.startswith("/admin/audit/")


@pytest.mark.parametrize("pattern", [
    # Each is read by one database's engine and refused by the other's: PostgreSQL's
    # (named groups, a bound past 255, Python's flags) and Python's, which SQLite's REGEXP is
    # (\y and \m, PostgreSQL's word bounds; a director; a look-behind of varying width).
    "(?P<n>o)", "o{256}", "(?a)o", r"\yo", r"\mo", "***:o", "(?<=r+)d",
])
def test_a_pattern_is_judged_by_the_engine_that_reads_it(admin_client, pattern):
    new_run()
    response = admin_client.get(f"/admin/runs/run/?business_key__regex={quote(pattern)}")
    if response.status_code == 302:
        assert [str(m) for m in get_messages(response.wsgi_request)] == [
            refused_pattern("business_key__regex", pattern)]
    else:
        assert response.status_code == 200
        assert not list(get_messages(response.wsgi_request))


def test_a_malformed_pattern_and_a_value_no_row_can_hold_are_both_named(admin_client):
    location, said = answer(admin_client, f"/admin/runs/run/?id__in={PAST}&id__iregex=)")
    assert location == "/admin/runs/run/"
    assert said == [f"{refused_filter('id__in', PAST)} {refused_pattern('id__iregex', ')')}"]
