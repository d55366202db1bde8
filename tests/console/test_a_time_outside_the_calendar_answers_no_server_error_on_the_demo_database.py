"""A time given from outside whose UTC value lies outside the years 1 to 9999 answers no
server error on the demo's SQLite database, whose adapter converts every time a query is
given to naive UTC (an OverflowError for 9999-12-31T23:59:59-23:59 or
0001-01-01T00:00:00+23:59): it is refused before any query is made (test_a_time_outside_the_
years_1_to_9999_in_utc_is_no_time says how, on both databases). An audit export never ends
as a 200 carrying its header alone: its filter is checked, and its query run, before the
first line is streamed. Marked demo_database: make test runs these on SQLite too."""

import json

import pytest
from django.db import DatabaseError
from django.urls import reverse
from django.utils.dateparse import parse_datetime

from audit.access import access_records
from audit.csv_export import access_csv_lines, audit_csv_lines
from audit.models import AuditRecord
from runs.models import RunStatus
from tests.factories import new_run, place

pytestmark = [pytest.mark.django_db, pytest.mark.demo_database]

OUTSIDE = ["9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+23:59"]


def _pages(when: str) -> list[tuple[str, dict, dict]]:
    """Each page of the console given `when`: (its address, its query, its headers)."""
    poll = {"HTTP_HX_REQUEST": "true"}
    return [
        (reverse("console:runs"), {"since": when}, {}),
        (reverse("console:runs"), {"until": when}, {}),
        (reverse("console:runs"), {"after": json.dumps([when, 1])}, {}),
        (reverse("console:runs"), {"new_since": when}, poll),
        (reverse("console:attention"), {"new_since": when}, poll),
        (reverse("console:audit"), {"since": when}, {}),
        (reverse("console:audit"), {"log": "access", "until": when}, {}),
        (reverse("console:bulk_preview"), {"action": "terminate", "since": when}, {}),
    ]


@pytest.mark.parametrize("when", OUTSIDE)
def test_no_page_given_a_time_outside_the_calendar_answers_a_server_error(
        client_for, auditor, operator, when):
    place(new_run(), status=RunStatus.ATTENTION)
    operator.groups.add(*auditor.groups.all())  # the access log too
    client = client_for(operator)
    for address, query, headers in _pages(when):
        # The test client raises what a view raised: a 500 fails here with its traceback.
        response = client.get(address, query, **headers)
        assert response.status_code in (200, 400), (address, query)
    started = client.post(reverse("console:bulk_start"), {
        "action": "terminate", "since": when, "reason": "incident", "previewed": "1"})
    assert started.status_code == 400


@pytest.mark.parametrize("name", ["since", "until"])
@pytest.mark.parametrize("when", OUTSIDE)
@pytest.mark.parametrize("log", ["audit", "access"])
def test_an_export_given_a_time_outside_the_calendar_is_refused_not_cut_short(
        client_for, auditor, stuck_run, log, name, when):
    query = {name: when, "format": "csv", **({"log": "access"} if log == "access" else {})}
    export = client_for(auditor).get(reverse("console:audit"), query)
    assert export.status_code == 400 and not export.streaming


@pytest.mark.parametrize("when", OUTSIDE)
@pytest.mark.parametrize(("lines", "records"), [
    (audit_csv_lines, AuditRecord.objects.all), (access_csv_lines, access_records)])
def test_an_export_whose_query_fails_fails_before_its_first_line(stuck_run, lines, records,
                                                                   when):
    chosen = records().filter(created_at__gte=parse_datetime(when))
    try:
        exported = lines(chosen)
    except (OverflowError, DatabaseError):
        # SQLite cannot convert the time, PostgreSQL takes no offset past 15:59: an error
        # when the export is asked for, never a 200 and a file of its header alone.
        return
    assert len(list(exported)) >= 1
