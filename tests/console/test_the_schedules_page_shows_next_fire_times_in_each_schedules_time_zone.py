"""The schedules page says "Times are shown in each schedule's time zone", and the command
line's `schedules list` gives them so (with their UTC offset). The page drew them in the
console's zone (UTC) instead: a daily cron at 12:30 in Europe/Berlin was listed at 10:30 or
11:30 UTC, and the two 02:30s of the night summer time ends at 00:30 and 01:30. Each is now
drawn at its wall-clock time in its own zone, named (CET or CEST, EST or EDT)."""

import re

import pytest

from runs.waiting import schedules
from tests.workflows import nightly

pytestmark = pytest.mark.django_db

ZONES = {"Europe/Berlin": "CES?T", "America/New_York": "E[SD]T"}


@pytest.fixture
def local_schedules():
    made = [schedules.Schedule(nightly, f"lunch-{zone.split('/')[1].lower()}",
                               cron="30 12 * * *", timezone=zone,
                               input=lambda slot: {"slot": slot.isoformat()})
            for zone in ZONES]
    yield made
    for schedule in made:
        schedules.registry.remove(schedule)


def test_next_fire_times_are_drawn_at_their_wall_clock_time_in_their_zone(
        client, operator, local_schedules):
    client.force_login(operator)
    page = client.get("/schedules/").content.decode()

    for zone, names in ZONES.items():
        row = page[page.index(f"{zone}</td>"):]
        row = row[:row.index("</tr>")]
        fires = re.findall(r"<div>(\d{4}-\d\d-\d\d \d\d:\d\d \w+)</div>", row)
        assert len(fires) == 3, row
        assert all(re.fullmatch(rf"\d{{4}}-\d\d-\d\d 12:30 {names}", f) for f in fires), fires
