"""Whether this process's workflow code can work the runs in flight. A release that changed
a workflow's steps without a new version, or left out a version runs still use, holds each
such run for a person only when the run next wakes (transitions.lease_cycle), which may be
weeks after the deploy (a run waiting for an approval, an event, a timer). Told at the
deploy instead, by the same rule (code_fit.code_problem): `manage.py check --database
default` warns once per such version, and each worker logs it at its start."""

import logging
from dataclasses import dataclass

from django.db import DatabaseError
from django.db.models import Count

from ..definitions import definition
from ..machine.code_fit import code_problem
from ..models import FINAL_RUN_STATUSES, Run, RunStatus, Step

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class UnworkableVersion:
    workflow: str
    version: int
    runs: int  # in flight (not final), drill runs included
    problem: str

    def __str__(self) -> str:
        return (f"{self.runs} run(s) in flight of {self.workflow} v{self.version}, some or "
                f"all of which this code cannot work (held for a person when they next "
                f"wake): {self.problem}; deploy the code "
                "that has this version as those runs were started (a changed workflow is a "
                "new version), or settle those runs first")


# The runs in flight: a status filter the status index serves (a NOT IN would read them all).
IN_FLIGHT = [status for status in RunStatus.values if status not in FINAL_RUN_STATUSES]


def unworkable_versions() -> list[UnworkableVersion]:
    """Each workflow version with runs in flight that this process's code cannot work, with
    how many runs and why. Judged on the oldest and the newest such run's steps: a run is
    started with the steps of its code then, so a version changed in place has runs of two
    shapes at most as often as it was changed, the first and the last the likeliest to
    differ from the code now."""
    live = (Run.objects.filter(status__in=IN_FLIGHT)
            .values("workflow_name", "workflow_version").annotate(runs=Count("pk"))
            .order_by("workflow_name", "workflow_version"))
    found = []
    for row in live:
        name, version = row["workflow_name"], row["workflow_version"]
        of_version = Run.objects.filter(status__in=IN_FLIGHT, workflow_name=name,
                                        workflow_version=version).only("pk", "status")
        for run in {r.pk: r for r in (of_version.order_by("pk").first(),
                                      of_version.order_by("-pk").first()) if r}.values():
            steps = list(Step.objects.filter(run_id=run.pk).order_by("position")
                         .values_list("name", flat=True))
            problem = code_problem(f"{name} v{version}",
                                   definition.registry.get(name, version), steps,
                                   undoing=run.status == RunStatus.COMPENSATING)
            if problem is not None:
                found.append(UnworkableVersion(name, version, row["runs"], problem))
                break
    return found


def log_unworkable_versions() -> None:
    """Say each unworkable version at WARNING (a worker's start: the deploy's log). Never
    keeps the process from starting: a check that cannot be made is said so."""
    try:
        found = unworkable_versions()
    except DatabaseError as exc:
        logger.warning("release check: the runs in flight could not be read (%s)",
                       str(exc).strip().splitlines()[0] if str(exc).strip() else
                       type(exc).__name__)
        return
    for version in found:
        logger.warning("release check: %s", version)
