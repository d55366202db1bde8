"""The console's and the CLI's list of schedules: each with its state, its next fire times and
its last runs."""

from dataclasses import dataclass
from datetime import datetime

from .. import store
from ..models import Run, ScheduleState
from ..waiting.schedules import KEY_PREFIX, Schedule, registry


@dataclass
class ScheduleRow:
    schedule: Schedule
    state: ScheduleState | None
    next_fires: list[datetime]
    last_runs: list[Run]
    # Why (some of) the next fire times cannot be shown, or "".
    next_problem: str = ""


def schedule_rows(*, now: datetime | None = None, workflows: set[str] | None = None,
                  last: int = 5) -> list[ScheduleRow]:
    """The console's list: every schedule with its next fire times and its last runs (one
    query for the states, one per schedule for its runs, on the business-key prefix index;
    the number of schedules is the number declared in code)."""
    now = now or store.current().now()
    schedules = [s for s in registry.all() if workflows is None or s.workflow_name in workflows]
    states = {(s.workflow_name, s.name): s for s in ScheduleState.objects.filter(
        workflow_name__in={s.workflow_name for s in schedules})}
    rows = []
    for schedule in schedules:
        state = states.get((schedule.workflow_name, schedule.name))
        runs = list(Run.objects.filter(
            workflow_name=schedule.workflow_name,
            business_key__startswith=f"{KEY_PREFIX}{schedule.name}:",
        ).order_by("-business_key").only(
            "id", "business_key", "status", "created_at", "workflow_name")[:last])
        paused = state is not None and state.paused
        next_fires, problem = ([], "") if paused else schedule.upcoming(now)
        rows.append(ScheduleRow(schedule=schedule, state=state, next_fires=next_fires,
                                last_runs=runs, next_problem=problem))
    return rows
