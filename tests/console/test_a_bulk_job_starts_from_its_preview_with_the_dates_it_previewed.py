"""A bulk action by filter is started from its preview's form: the preview carries the
filter as it was given (a From/Until date too, not as a page displays it), so the job
starts and covers the runs the preview counted. A date at the limits of the calendar is
refused with the reason or previewed, never a server error."""

from datetime import UTC, datetime
from html.parser import HTMLParser

import pytest
from django.urls import reverse

from approvals.bulk import run_bulk_job
from approvals.models import BulkJob
from runs.models import RunStatus, StepStatus
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


class _StartForm(HTMLParser):
    """The fields the preview's start form posts: its hidden inputs."""

    def __init__(self):
        super().__init__()
        self.fields: list[tuple[str, str]] = []
        self._inside = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form" and attrs.get("action") == reverse("console:bulk_start"):
            self._inside = True
        elif tag == "input" and self._inside and attrs.get("type") == "hidden" \
                and attrs.get("name") != "csrfmiddlewaretoken":
            self.fields.append((attrs["name"], attrs.get("value") or ""))

    def handle_endtag(self, tag):
        if tag == "form":
            self._inside = False


def hidden_fields(page: str) -> dict:
    parser = _StartForm()
    parser.feed(page)
    fields = dict(parser.fields)
    assert fields.get("action"), "the preview has no start form"
    return fields


def _failed_at(when: datetime):
    return place(new_run(), status=RunStatus.ATTENTION,
                 step_statuses={"create-task": StepStatus.FAILED}, updated_at=when)


@pytest.mark.parametrize("dates", [
    {"since": "2020-01-01T00:00:00+00:00", "until": "2020-02-01T00:00:00+00:00"},
    {"since": "2020-01-01 00:00", "until": "2020-02-01 00:00"},
    {"since": "2020-01-01T00:00"},
    {"until": "2020-02-01T00:00:00Z"},
])
def test_a_job_started_from_the_preview_of_a_date_range_covers_the_previewed_runs(
        client_for, operator, settings, dates):
    settings.TIME_ZONE = "UTC"
    inside = [_failed_at(datetime(2020, 1, 15, tzinfo=UTC)) for _ in range(2)]
    before = _failed_at(datetime(2019, 12, 31, 23, 59, tzinfo=UTC))
    after = _failed_at(datetime(2020, 2, 1, 0, 0, 1, tzinfo=UTC))
    expected = {r.pk for r in inside} | ({after.pk} if "until" not in dates else set()) \
        | ({before.pk} if "since" not in dates else set())
    client = client_for(operator)
    preview = client.get(reverse("console:bulk_preview"),
                         {"status": "attention", "time_field": "updated", **dates,
                          "action": "terminate"})
    assert preview.status_code == 200
    assert preview.context["preview"].matching == len(expected)
    fields = hidden_fields(preview.content.decode())
    started = client.post(reverse("console:bulk_start"), {**fields, "reason": "incident"})
    assert started.status_code == 302, started.content.decode()[:2000]
    job = BulkJob.objects.get()
    assert job.total == len(expected)
    assert started.url == reverse("console:bulk_job", args=[job.pk])
    assert job.filters["status"] == "attention"
    for name in dates:
        assert job.filters[name] is not None


def test_a_preview_shows_the_dates_as_they_were_given(client_for, operator):
    page = client_for(operator).get(reverse("console:bulk_preview"), {
        "since": "2020-01-01T00:00", "action": "terminate"}).content.decode()
    assert "since=2020-01-01T00:00" in page
    assert "midnight" not in page


EXTREMES = ["9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00",
            "9999-12-31T23:59:59", "0001-01-01T00:00:00"]


@pytest.mark.parametrize("name", ["since", "until"])
@pytest.mark.parametrize("when", EXTREMES)
def test_a_date_at_the_limits_of_the_calendar_is_previewed_or_refused_never_a_crash(
        client_for, operator, name, when):
    client = client_for(operator)
    # A run the date leaves in (a job is made) or out (the start is refused, naming it).
    place(new_run(), status=RunStatus.ATTENTION)
    preview = client.get(reverse("console:bulk_preview"), {name: when, "action": "terminate"})
    assert preview.status_code in (200, 400)
    if preview.status_code == 400:
        assert f"Invalid filter field {name}" in preview.content.decode()
        return
    if not preview.context["preview"].matching:
        # Nothing to start: the preview offers no form (a start would be refused).
        assert "matches no run you may see" in preview.content.decode()
        assert reverse("console:bulk_start") not in preview.content.decode()
        return
    fields = hidden_fields(preview.content.decode())
    started = client.post(reverse("console:bulk_start"), {**fields, "reason": "incident"})
    assert started.status_code in (302, 400)
    if started.status_code == 302:
        job = BulkJob.objects.get()
        assert fields[name] == when
        run_bulk_job(job.pk)
        assert client.get(reverse("console:bulk_job", args=[job.pk])).status_code == 200


@pytest.mark.parametrize("when", EXTREMES)
def test_the_runs_list_with_a_date_at_the_limits_of_the_calendar_is_no_crash(
        client_for, operator, when):
    response = client_for(operator).get(reverse("console:runs"), {"since": when})
    assert response.status_code == 200
