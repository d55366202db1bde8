"""A time given from outside whose UTC value lies outside the years 1 to 9999
(9999-12-31T23:59:59-23:59 is in the year 10000 there, 0001-01-01T00:00:00+14:00 in the
year 0) is no time, on PostgreSQL as on the demo's SQLite: a filter's From or Until (the runs
list, the audit and access logs, a bulk action's preview and start) is refused naming the
field, as "2026-13-45" is; its export is refused (400), never a file; a page cursor holding
one is no cursor (the first page); the moment a page was drawn (new_since) given as one, or
without its UTC offset (no instant), is no moment, so no "new runs" are counted from it.
PostgreSQL compared such a time (with an offset it takes), which SQLite's adapter cannot
convert (500s on the demo: test_a_time_outside_the_calendar_answers_no_server_error_on_the_
demo_database). A time in the calendar is read as its UTC instant, whatever offset Python
reads it with: PostgreSQL refuses one past 15:59 (a 500)."""

import html
import json

import pytest
from django.urls import reverse

from approvals.models import BulkJob
from audit.models import AuditRecord
from runs.models import RunStatus
from runs.reads.cursors import parse_stamp
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db

OUTSIDE = ["9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00",
           "9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+23:59"]
# In the calendar, at an offset PostgreSQL takes from no one (more than 15:59).
FAR_EAST = "2000-01-01T00:00:00+23:59"
FAR_WEST = "2999-12-31T00:00:00-20:00"


def _body(response) -> str:
    return html.unescape(response.content.decode())


@pytest.mark.parametrize("when", OUTSIDE)
def test_parse_stamp_reads_no_time_outside_the_calendar_or_without_an_offset(when):
    assert parse_stamp(when) is None
    assert parse_stamp("2026-01-01T00:00:00") is None  # no offset: no instant
    assert parse_stamp("9999-12-31T23:59:59+00:00") is not None
    assert parse_stamp("0001-01-01T00:00:00-12:00") is not None


@pytest.mark.parametrize(("name", "label"), [("since", "From"), ("until", "Until")])
@pytest.mark.parametrize("when", OUTSIDE)
def test_the_runs_list_refuses_a_from_or_until_outside_the_calendar_naming_it(
        client_for, operator, name, label, when):
    run = new_run()
    response = client_for(operator).get(reverse("console:runs"), {name: when})
    assert response.status_code == 200
    body = _body(response)
    assert f"{name} ({label}): Enter a valid date/time: {when}" in body
    assert "rows" not in response.context and run.pk not in response.context.get("ids", [])


@pytest.mark.parametrize("name", ["since", "until"])
@pytest.mark.parametrize("when", OUTSIDE)
def test_the_audit_log_refuses_a_time_outside_the_calendar_and_exports_nothing(
        client_for, operator, stuck_run, name, when):
    assert AuditRecord.objects.filter(run=stuck_run).exists()
    client = client_for(operator)
    response = client.get(reverse("console:audit"), {name: when})
    assert response.status_code == 200
    assert f"Invalid filter field {name} ({name.title()}): Enter a valid date/time: {when}" \
        in _body(response)
    assert not response.context.get("records")
    export = client.get(reverse("console:audit"), {name: when, "format": "csv"})
    assert export.status_code == 400 and not export.streaming
    assert f"Invalid filter field {name}" in _body(export)


@pytest.mark.parametrize("name", ["since", "until"])
@pytest.mark.parametrize("when", OUTSIDE)
def test_the_access_log_refuses_a_time_outside_the_calendar_and_exports_nothing(
        client_for, auditor, name, when):
    client = client_for(auditor)
    response = client.get(reverse("console:audit"), {"log": "access", name: when})
    assert response.status_code == 200
    assert f"Invalid filter field {name} ({name.title()}): Enter a valid date/time: {when}" \
        in _body(response)
    export = client.get(reverse("console:audit"), {"log": "access", name: when,
                                                   "format": "csv"})
    assert export.status_code == 400 and not export.streaming


@pytest.mark.parametrize("name", ["since", "until"])
@pytest.mark.parametrize("when", OUTSIDE)
def test_a_bulk_action_by_filter_is_neither_previewed_nor_started_from_a_time_outside_it(
        client_for, operator, name, when):
    place(new_run(), status=RunStatus.ATTENTION)
    client = client_for(operator)
    preview = client.get(reverse("console:bulk_preview"), {"action": "terminate",
                                                           name: when})
    assert preview.status_code == 400
    assert f"Invalid filter field {name}" in _body(preview)
    started = client.post(reverse("console:bulk_start"), {
        "action": "terminate", name: when, "reason": "incident", "previewed": "1"})
    assert started.status_code == 400
    assert f"Invalid filter field {name}" in _body(started)
    assert not BulkJob.objects.exists()


@pytest.mark.parametrize("when", OUTSIDE)
def test_a_page_cursor_holding_a_time_outside_the_calendar_is_the_first_page(
        client_for, operator, when):
    run = new_run()
    response = client_for(operator).get(reverse("console:runs"),
                                        {"after": json.dumps([when, 1])})
    assert response.status_code == 200
    assert response.context["first_page"] and run.pk in response.context["ids"]


@pytest.mark.parametrize("since", [*OUTSIDE, "2026-01-01T00:00:00"])
@pytest.mark.parametrize("page", ["console:runs", "console:attention"])
def test_new_since_outside_the_calendar_or_without_an_offset_counts_nothing(
        client_for, operator, page, since):
    place(new_run(), status=RunStatus.ATTENTION)
    response = client_for(operator).get(reverse(page), {"new_since": since},
                                        HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    # Not the poll's count from that moment: the page, drawn now, as for "2026-13-45".
    assert response.templates[0].name == f"console/{page.split(':')[1]}.html"
    assert response.context["new_count"] == 0


def test_a_time_in_the_calendar_at_any_offset_is_read_as_its_utc_instant(
        client_for, auditor, operator, stuck_run):
    operator.groups.add(*auditor.groups.all())  # the access log too
    run = place(new_run(), status=RunStatus.ATTENTION)
    client = client_for(operator)
    listed = client.get(reverse("console:runs"), {"since": FAR_EAST, "until": FAR_WEST})
    assert listed.status_code == 200 and run.pk in listed.context["ids"]
    form = listed.context["form"]
    assert form.cleaned_data["since"].isoformat() == "1999-12-31T00:01:00+00:00"
    assert form.cleaned_data["until"].isoformat() == "2999-12-31T20:00:00+00:00"
    # The page carries the dates as they were given, not as cleaned.
    assert form.given()["since"] == FAR_EAST
    cursor = client.get(reverse("console:runs"), {"after": json.dumps([FAR_WEST, 1])})
    assert not cursor.context["first_page"] and run.pk in cursor.context["ids"]
    for page in ("console:runs", "console:attention"):
        poll = client.get(reverse(page), {"new_since": FAR_EAST}, HTTP_HX_REQUEST="true")
        assert poll.status_code == 200 and poll.context["new_count"] >= 1
    audit = client.get(reverse("console:audit"), {"since": FAR_EAST, "until": FAR_WEST})
    assert audit.status_code == 200 and audit.context["records"]
    export = client.get(reverse("console:audit"), {"since": FAR_EAST, "format": "csv"})
    assert export.status_code == 200 and len(list(export.streaming_content)) > 1
    access = client.get(reverse("console:audit"), {"log": "access", "until": FAR_WEST})
    assert access.status_code == 200
    preview = client.get(reverse("console:bulk_preview"), {"action": "terminate",
                                                           "since": FAR_EAST})
    assert preview.status_code == 200 and preview.context["preview"].matching
    assert parse_stamp(FAR_EAST).isoformat() == "1999-12-31T00:01:00+00:00"
