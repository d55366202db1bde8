"""Schedules: each slot starts at most one run, keyed by the slot; catch-up after downtime
follows the declared policy; two schedulers or a restarted beat never start a slot twice;
a paused schedule starts nothing."""

import json
import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from audit.chain import Actor
from runs.models import ControlRecord, Run, ScheduleState
from runs.waiting import schedules
from runs.waiting.schedules import Schedule, ScheduleError, fire_schedule
from tests.processes import manage
from tests.workflows import every_minute, nightly

T0 = datetime(2026, 3, 2, 9, 0, 30, tzinfo=UTC)
SYSTEM = Actor.system("test")


def scheduled_runs():
    return list(Run.objects.filter(workflow_name="test-scheduled").order_by("business_key")
                .values_list("business_key", flat=True))


def schedule(**options) -> Schedule:
    options.setdefault("every", timedelta(minutes=1))
    return Schedule(nightly, options.pop("name", "probe"), register=False,
                    input=lambda slot: {"slot": slot.isoformat()}, **options)


@pytest.mark.django_db
def test_each_slot_starts_one_run_whose_business_key_is_the_slot():
    probe = schedule()
    # First sight: the schedule starts with its next slot, it does not run its past.
    assert fire_schedule(probe, now=T0).started == []
    report = fire_schedule(probe, now=T0 + timedelta(minutes=1))
    assert len(report.started) == 1
    run = Run.objects.get(pk=report.started[0])
    assert run.business_key == "schedule:probe:2026-03-02T09:01:00Z"
    assert run.input == {"slot": "2026-03-02T09:01:00+00:00"}
    # The same tick again (a redelivered beat message) starts nothing new.
    again = fire_schedule(probe, now=T0 + timedelta(minutes=1))
    assert again.started == [] and again.found == []
    assert scheduled_runs() == ["schedule:probe:2026-03-02T09:01:00Z"]
    state = ScheduleState.objects.get(name="probe")
    assert state.last_slot_at == datetime(2026, 3, 2, 9, 1, tzinfo=UTC)
    assert state.last_run_id == run.pk


def test_a_cron_schedule_fires_at_local_time_in_its_time_zone_across_daylight_saving():
    daily = Schedule(nightly, "daily", cron="0 6 * * *", timezone="Europe/Berlin",
                     register=False, input=lambda slot: {"slot": slot.isoformat()})
    # The night Berlin moves to summer time (29 March 2026): 06:00 local is 05:00Z, then 04:00Z.
    slots = daily.next_slots(datetime(2026, 3, 28, 12, tzinfo=UTC), count=2)
    assert [s.astimezone(UTC) for s in slots] == [datetime(2026, 3, 29, 4, tzinfo=UTC),
                                                  datetime(2026, 3, 30, 4, tzinfo=UTC)]
    assert all(s.hour == 6 for s in slots)
    before = daily.next_slots(datetime(2026, 3, 27, 12, tzinfo=UTC), count=1)[0]
    assert before.astimezone(UTC) == datetime(2026, 3, 28, 5, tzinfo=UTC)
    assert daily.business_key(before) == "schedule:daily:2026-03-28T05:00:00Z"


@pytest.mark.parametrize("options, message", [
    ({"cron": "61 * * * *"}, "cron expression"),
    ({"cron": "0 6 * * *", "every": timedelta(minutes=1)}, "either cron or every"),
    ({"every": timedelta(minutes=1), "timezone": "Mars/Olympus"}, "unknown time zone"),
    # The zone of whichever host ticks: another host would start each slot at another time.
    ({"every": timedelta(minutes=1), "timezone": "localtime"}, "unknown time zone"),
    ({"every": timedelta(minutes=1), "catch_up": "some"}, "catch_up must be one of"),
    ({"every": timedelta(0)}, "every must be positive"),
])
def test_a_wrong_declaration_is_refused_with_what_is_wrong(options, message):
    with pytest.raises(ScheduleError, match=message):
        Schedule(nightly, "bad", register=False, **options)


@pytest.mark.django_db
@pytest.mark.parametrize("policy, expected", [
    # Down from 09:01 to 09:10:30: the slots 09:02 .. 09:10 were due meanwhile.
    ("skip", ["09:10"]),                      # only the one still within its grace
    ("latest", ["09:10"]),
    ("all", [f"09:{m:02}" for m in range(2, 11)]),
])
def test_after_downtime_the_catch_up_policy_decides_which_missed_slots_run(policy, expected):
    probe = schedule(catch_up=policy, grace=timedelta(seconds=45))
    fire_schedule(probe, now=T0)
    fire_schedule(probe, now=T0 + timedelta(minutes=1))           # 09:01 on time
    report = fire_schedule(probe, now=T0 + timedelta(minutes=10))  # back at 09:10:30
    keys = [k for k in scheduled_runs() if k != "schedule:probe:2026-03-02T09:01:00Z"]
    assert keys == [f"schedule:probe:2026-03-02T{hhmm}:00Z" for hhmm in expected]
    assert report.skipped == 9 - len(expected)
    # Whatever the policy, the missed slots are handled: the next tick starts nothing.
    assert fire_schedule(probe, now=T0 + timedelta(minutes=10)).started == []


@pytest.mark.django_db
def test_skip_starts_nothing_when_every_missed_slot_is_past_its_grace():
    probe = schedule(catch_up="skip", grace=timedelta(seconds=10))
    fire_schedule(probe, now=T0)
    report = fire_schedule(probe, now=T0 + timedelta(minutes=5))  # 09:05:30, slot 30 s old
    assert report.started == [] and report.skipped == 5
    assert scheduled_runs() == []
    assert ScheduleState.objects.get(name="probe").last_slot_at == \
        datetime(2026, 3, 2, 9, 5, tzinfo=UTC)


@pytest.mark.django_db(transaction=True)
def test_two_schedulers_racing_on_the_same_slots_start_each_slot_once():
    probe = schedule(catch_up="all")
    fire_schedule(probe, now=T0)
    later = T0 + timedelta(minutes=20)   # 20 slots due at once
    barrier = threading.Barrier(2)
    reports, errors = [], []

    def scheduler():
        try:
            barrier.wait()
            reports.append(fire_schedule(probe, now=later))
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=scheduler) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    keys = scheduled_runs()
    assert len(keys) == len(set(keys)) == 20
    # Every slot was started by exactly one of them; the other found its run.
    started = [pk for r in reports for pk in r.started]
    assert len(started) == len(set(started)) == 20
    assert sorted(started) == sorted(Run.objects.values_list("pk", flat=True))


@pytest.mark.django_db(transaction=True)
def test_a_restarted_beat_and_two_real_schedulers_never_start_a_slot_twice():
    # Real processes, each a scheduler tick as beat sends it, sharing the test database.
    def tick(at: datetime):
        return manage("schedules", "tick", "--now", at.isoformat())

    def finish(process):
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
        return json.loads(out.strip().splitlines()[-1])

    finish(tick(T0))                                     # first sight: nothing to run
    first = finish(tick(T0 + timedelta(minutes=1)))
    assert len(first["started"]) == 1
    # Beat restarted: the same tick again from a new process starts nothing.
    assert finish(tick(T0 + timedelta(minutes=1)))["started"] == []
    # Down for five minutes, then two schedulers (two beats by mistake) tick at once.
    both = [tick(T0 + timedelta(minutes=6)), tick(T0 + timedelta(minutes=6))]
    results = [finish(p) for p in both]
    started = [pk for r in results for pk in r["started"]]
    assert len(started) == len(set(started)) == 5    # catch_up="all": 09:02 .. 09:06
    assert scheduled_runs() == [f"schedule:every-minute:2026-03-02T09:{m:02}:00Z"
                                for m in range(1, 7)]


@pytest.mark.django_db
def test_a_paused_schedule_starts_nothing_and_resumes_from_now_with_who_and_why():
    probe = schedule()
    schedules.registry.add(probe)
    try:
        fire_schedule(probe, now=T0)
        with pytest.raises(ScheduleError, match="reason is required"):
            schedules.set_paused(workflow="test-scheduled", name="probe", paused=True,
                                 actor=SYSTEM, reason=" ")
        schedules.set_paused(workflow="test-scheduled", name="probe", paused=True,
                             actor=SYSTEM, reason="receiver down", now=T0)
        assert fire_schedule(probe, now=T0 + timedelta(minutes=5)).started == []
        schedules.set_paused(workflow="test-scheduled", name="probe", paused=False,
                             actor=SYSTEM, reason="receiver back",
                             now=T0 + timedelta(minutes=5))
        # The slots missed while paused are not run; the next one is.
        assert fire_schedule(probe, now=T0 + timedelta(minutes=5)).started == []
        assert len(fire_schedule(probe, now=T0 + timedelta(minutes=6)).started) == 1
        assert scheduled_runs() == ["schedule:probe:2026-03-02T09:06:00Z"]
        assert list(ControlRecord.objects.order_by("id").values_list(
            "action", "target", "actor_label", "reason")) == [
            ("schedule_paused", "probe", "test", "receiver down"),
            ("schedule_resumed", "probe", "test", "receiver back")]
    finally:
        schedules.registry.remove(probe)


@pytest.mark.django_db
def test_a_slot_whose_input_fails_the_schema_is_refused_and_the_others_still_run():
    probe = Schedule(nightly, "broken", every=timedelta(minutes=1), register=False,
                     input=lambda slot: {"wrong": 1})
    fire_schedule(probe, now=T0)
    report = fire_schedule(probe, now=T0 + timedelta(minutes=1))
    assert report.started == [] and "does not match its schema" in report.refused[0]
    assert scheduled_runs() == []


def test_the_test_schedule_is_registered():
    assert schedules.registry.get("test-scheduled", "every-minute") is every_minute


@pytest.mark.django_db
def test_a_schedules_pause_and_resume_keep_their_reasons_masked():
    probe = schedule()
    schedules.registry.add(probe)
    try:
        state = schedules.set_paused(workflow="test-scheduled", name="probe", paused=True,
                                     actor=SYSTEM, reason="vendor down, token=abc123secret",
                                     now=T0)
        assert state.pause_reason == "vendor down, token=[redacted]"
        schedules.set_paused(workflow="test-scheduled", name="probe", paused=False,
                             actor=SYSTEM, reason="back; password=hunter2", now=T0)
        assert list(ControlRecord.objects.order_by("id").values_list("reason", flat=True)) == [
            "vendor down, token=[redacted]", "back; password=[redacted]"]
        assert not ControlRecord.objects.filter(reason__contains="hunter2").exists()
    finally:
        schedules.registry.remove(probe)
