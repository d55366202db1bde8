"""The metrics of paused dispatch and schedules: which workflows (and which of their remote
systems) are paused now, and which schedules. A series for every registered workflow, 0
when it runs, so an alert can fire on a pause left on for too long."""

from prometheus_client.core import GaugeMetricFamily

from runs.machine import dispatch
from runs.models import DispatchPause, ScheduleState
from runs.waiting import schedules


def dispatch_families(now, names):
    paused = GaugeMetricFamily(
        "durable_dispatch_paused",
        "1 while a workflow's dispatch is paused (system empty: every step; else only the "
        "steps reaching that system).", labels=["workflow", "system"])
    since = GaugeMetricFamily(
        "durable_dispatch_paused_seconds", "How long the pause has been in force.",
        labels=["workflow", "system"])
    rows = list(DispatchPause.objects.values_list("workflow_name", "system", "paused_at"))
    seen = set()
    for workflow, system, paused_at in rows:
        paused.add_metric([workflow, system], 1)
        since.add_metric([workflow, system], max((now - paused_at).total_seconds(), 0))
        seen.add((workflow, system))
    for name in sorted(names):
        if (name, "") not in seen:
            paused.add_metric([name, ""], 0)
    yield paused
    yield since
    family = GaugeMetricFamily("durable_schedule_paused", "1 while a schedule is paused.",
                               labels=["workflow", "schedule"])
    states = set(ScheduleState.objects.filter(paused=True).values_list("workflow_name", "name"))
    for schedule in schedules.registry.all():
        key = (schedule.workflow_name, schedule.name)
        family.add_metric(list(key), 1 if key in states else 0)
    yield family
    # Each process reads pauses through a short cache; a scrape is a fresh look.
    dispatch.forget_cache()
