"""The runs list and the attention page leave drill runs out unless asked for (?drills=1).
The numbers beside them counted drill runs anyway: the attention page's "N new" bar said
"1 new — show" for a drill run its link did not show, and the status counts above the runs
list said "completed 1" for a list, behind the count's link, of no run. Each counts what
its list shows; the bar of the drill view counts drill runs and its link keeps that view."""

import re
from urllib.parse import unquote

import pytest
from django.urls import reverse
from django.utils import timezone

from runs.models import RunStatus
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


def shown(body: str) -> list[int]:
    return list(dict.fromkeys(int(pk) for pk in re.findall(r"#(\d+)<", body)))


def new_bar(client, **query) -> str:
    page = client.get(reverse("console:attention"), query).content.decode()
    drawn_at = unquote(re.search(r"new_since=([^\"&]+)", page).group(1))
    place(new_run(drill=True), status=RunStatus.ATTENTION, updated_at=timezone.now())
    return client.get(reverse("console:attention"), {**query, "new_since": drawn_at},
                      HTTP_HX_REQUEST="true").content.decode()


def test_the_attention_pages_new_bar_counts_no_drill_run(client_for, operator):
    bar = new_bar(client_for(operator))

    assert "new — show" not in bar


def test_the_drill_views_new_bar_counts_drill_runs_and_its_link_keeps_the_view(client_for,
                                                                               operator):
    bar = new_bar(client_for(operator), drills="1")

    assert "1 new — show" in bar
    assert 'href="/attention/?drills=1"' in bar
    assert "?drills=1&amp;new_since=" in bar


@pytest.mark.parametrize("status", [RunStatus.COMPLETED, RunStatus.QUEUED,
                                    RunStatus.TERMINATED, RunStatus.ATTENTION])
def test_a_status_count_counts_the_runs_its_link_lists(client_for, operator, status):
    place(new_run(drill=True, wake=False), status=status)
    real = place(new_run(wake=False), status=status)
    client = client_for(operator)

    counts = client.get(reverse("console:runs")).context["counts"]
    listed = shown(client.get(reverse("console:runs"), {"status": status}).content.decode())

    assert listed == [real.pk]
    assert counts[status] == 1
