"""fire_schedule(now=...) takes any aware datetime as the instant it is. Given one in the
schedule's own zone (Europe/Berlin), it compared the slots with it on that zone's wall
clock, blind to which of the two 02:30s of the night summer time ends each is: ticking at
02:30 the first time (00:30 UTC) started the second 02:30 (01:30 UTC) an hour early. The
CLI passes UTC; the same ticks given in the zone start the same runs, none before its
slot."""

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from runs.models import Run
from runs.waiting.schedules import fire_schedule
from tests.runs.test_a_daily_schedule_fires_once_on_the_nights_the_clocks_change import (
    AUTUMN,
    berlin,
)

pytestmark = pytest.mark.django_db
BERLIN = ZoneInfo("Europe/Berlin")


def runs_by_slot() -> dict[int, datetime]:
    return {pk: datetime.fromisoformat(data["slot"]) for pk, data in
            Run.objects.filter(workflow_name="test-scheduled").values_list("pk", "input")}


@pytest.mark.parametrize("zone", [UTC, BERLIN])
def test_each_slot_starts_once_and_never_before_its_time_whatever_the_zone_of_now(zone):
    schedule = berlin("*/30 * * * *")
    for minutes in range(0, 10 * 60 + 1, 2):
        now = (AUTUMN + timedelta(minutes=minutes)).astimezone(zone)
        report = fire_schedule(schedule, now=now)
        assert (report.refused, report.failed) == ([], [])
        slots = runs_by_slot()
        early = [slots[pk].isoformat() for pk in report.started if slots[pk] > now]
        assert early == [], f"started at {now.isoformat()}"
    slots = sorted(slot.astimezone(UTC) for slot in runs_by_slot().values())
    # 20:30Z to 06:00Z, every half hour, each once: both hours of the night's 02:00 included.
    assert slots == [AUTUMN + timedelta(minutes=30 * n) for n in range(1, 21)]
