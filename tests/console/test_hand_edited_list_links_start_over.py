"""A list link edited by hand never fails: the moment a page was drawn (new_since) that no
"new runs" count can look back from counts from the earliest time there is, one that names
no moment (no offset, or a UTC value outside the years 1 to 9999) draws the page whole, and
a page cursor holding text the database cannot store is no cursor (the first page)."""

import json

import pytest
from django.urls import reverse

from runs.models import RunStatus
from runs.reads import selectors
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db

EARLIEST = ["0001-01-01T00:00:00+00:00", "0001-01-01T00:00:03Z", "0001-01-01T14:00:00+14:00",
            "0001-01-01T00:00:01-12:00"]
NO_MOMENT = ["0001-01-01T00:00:00", "0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-23:59"]


@pytest.mark.parametrize("since", EARLIEST)
@pytest.mark.parametrize("page", ["console:runs", "console:attention"])
def test_the_new_runs_poll_from_the_earliest_time_there_is_counts_every_run_not_shown(
        client_for, operator, page, since):
    shown = place(new_run(), status=RunStatus.ATTENTION)
    other = place(new_run(), status=RunStatus.ATTENTION)
    response = client_for(operator).get(reverse(page), {"new_since": since,
                                                        "shown": str(shown.pk)},
                                        HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert response.context["new_count"] == 1 and other.pk not in response.context["ids"]


@pytest.mark.parametrize("since", NO_MOMENT)
@pytest.mark.parametrize("page", ["console:runs", "console:attention"])
def test_a_new_runs_poll_from_no_moment_draws_the_page_whole(client_for, operator, page, since):
    from runs.reads.cursors import parse_stamp

    run = place(new_run(), status=RunStatus.ATTENTION)
    response = client_for(operator).get(reverse(page), {"new_since": since,
                                                        "shown": str(run.pk)},
                                        HTTP_HX_REQUEST="true")
    assert parse_stamp(since) is None
    assert response.status_code == 200
    # The page, not the "N new" bar: nothing was counted.
    assert response.templates[0].name != "console/_new_runs.html"
    assert run.pk in response.context["ids"]


@pytest.mark.parametrize("since", EARLIEST)
def test_the_new_counts_take_the_earliest_time_there_is(operator, since):
    from runs.reads.cursors import parse_stamp

    place(new_run(), status=RunStatus.ATTENTION)
    when = parse_stamp(since)
    assert selectors.new_runs_count(selectors.RunFilters(), workflow_ids=None,
                                    since=when) == 1
    assert selectors.attention_new_count(workflow_ids=None, since=when) == 1


@pytest.mark.parametrize(("sort", "after"), [
    ("workflow", ["a\x00", "b"]), ("-workflow", ["a", "b\x00"]), ("step", ["x\x00", 5]),
    ("status", ["attention\x00", "2026-01-01T00:00:00+00:00", 5]), ("workflow", ["\ud800", "b"])])
def test_a_cursor_with_text_the_database_cannot_hold_is_the_first_page(
        client_for, operator, sort, after):
    run = new_run()
    response = client_for(operator).get(reverse("console:runs"),
                                        {"sort": sort, "after": json.dumps(after)})
    assert response.status_code == 200
    assert response.context["first_page"] and run.pk in response.context["ids"]
