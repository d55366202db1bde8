"""A failing schedule as an operator meets it: the schedules page and `manage.py schedules
list` (text and JSON) say since when, how many ticks and the last error (escaped on the
page), the metric an alert reads counts it, and a schedule whose next slots cannot be
computed is said so instead of failing the page."""

import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from runs.reads.schedule_list import schedule_rows
from runs.waiting.schedules import fire_due_schedules

pytestmark = pytest.mark.django_db

SCRIPT = "<script>alert(1)</script>"




@pytest.fixture
def failing(declared_schedule):
    """The schedule "broken", whose input raises an error holding markup, failed at three
    ticks; returns the first tick's time."""
    def input_for(slot):
        raise RuntimeError(f"lookup failed: {SCRIPT}")

    declared_schedule("broken", input=input_for)
    start = timezone.now().replace(second=30, microsecond=0) - timedelta(minutes=10)
    fire_due_schedules(now=start)
    for n in (1, 2, 3):
        fire_due_schedules(now=start + timedelta(minutes=n))
    return start + timedelta(minutes=1)


def test_the_schedules_page_shows_a_failing_schedule_with_its_error_escaped(
        client, operator, failing):
    client.force_login(operator)
    response = client.get("/schedules/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "failing</span> since " + failing.strftime("%Y-%m-%d %H:%M:%S") in page
    assert "3 ticks in a row" in page
    assert "RuntimeError: lookup failed: &lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert SCRIPT not in page


def test_the_cli_list_shows_a_failing_schedule_in_text_and_json(failing, capsys):
    call_command("schedules", "list")
    text = capsys.readouterr().out
    assert (f"  FAILING since {failing.isoformat()}, 3 tick(s) in a row: RuntimeError: "
            f"lookup failed: {SCRIPT}") in text.splitlines()
    call_command("schedules", "list", "--json")
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["broken"]["failing"] == {
        "since": failing.isoformat(), "failures": 3,
        "last_error": f"RuntimeError: lookup failed: {SCRIPT}"}
    assert rows["every-minute"]["failing"] is None


def test_a_schedule_whose_next_slots_run_past_the_calendar_still_renders_the_page(
        client, operator, declared_schedule, capsys):
    # No next slot before 9999 (declared under "all": the other catch-up policies refuse a
    # look back past the year 1 when declared).
    declared_schedule("far", every=timedelta(days=3_000_000), catch_up="all")
    declared_schedule("three-millennia", every=timedelta(days=1_095_000),  # two, then past 9999
                      catch_up="all")
    client.force_login(operator)
    response = client.get("/schedules/")
    assert response.status_code == 200
    page = response.content.decode()
    assert page.count("the next slot cannot be computed: it falls past the year 9999") == 2
    rows = {row.schedule.name: row for row in schedule_rows()}
    assert rows["far"].next_fires == []
    assert [s.year for s in rows["three-millennia"].next_fires] == [4998, 7996]
    call_command("schedules", "list")
    assert "cannot be computed" in capsys.readouterr().out


def metric(client, name):
    body = client.get("/metrics").content.decode()
    return {s.labels["schedule"]: s.value for f in text_string_to_metric_families(body)
            for s in f.samples if s.name == name}


def test_the_metric_counts_the_schedules_failing_now(client, declared_schedule, failing):
    declared_schedule("other-broken", input=lambda slot: {"wrong": 1})
    now = timezone.now()
    fire_due_schedules(now=now - timedelta(minutes=2))
    fire_due_schedules(now=now)
    failing_now = metric(client, "durable_schedule_failing")
    assert failing_now == {"broken": 1, "other-broken": 1, "every-minute": 0}
    assert sum(failing_now.values()) == 2
