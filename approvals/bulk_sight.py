"""What a bulk job's person could see when the job started, and the runs they lost sight of
since.

A job's runs are those its filter matched when it started among the runs its person could
see then (the job's `sight`, their grant of view_runs), worked through as its filter matches
them when each is reached. A run the person may no longer see when it is reached (a
permission taken away meanwhile) is not acted on, and is told apart from a run that left
the filter: counted as no longer visible to them, and never named (approvals.bulk_outcomes
lists no such row), since whoever may not see a run learns nothing more of it. A job
started by the release before keeps no sight: its runs are those its person may see as
each batch is listed, and a run they lost sight of is counted with those that moved on.
"""

from runs.models import Run
from runs.permissions import VIEW, Grant, grant_for, run_access
from runs.reads.selectors import RunFilters, runs_matching

from .models import BulkJob


class LostSight(Exception):
    """The job's person may no longer see the run; nothing was done to it."""


def sight_at_start(user) -> dict:
    """What `user` may see now, as a job they start keeps it."""
    grant = grant_for(user, VIEW)
    return {"everywhere": grant.everywhere, "workflow_ids": sorted(grant.workflow_ids)}


def visible_runs(user, filters: RunFilters):
    """The runs `filters` matches that `user` may see now."""
    return _matching(grant_for(user, VIEW), filters)


def job_runs(job: BulkJob):
    """The runs job `job`'s filter matches now, among those its person could see when it
    started (of a job that kept no sight: that they may see now)."""
    filters = RunFilters.from_json(job.filters)
    if job.sight is None:
        return visible_runs(job.requested_by, filters)
    return _matching(Grant(bool(job.sight.get("everywhere")),
                           frozenset(job.sight.get("workflow_ids", []))), filters)


def lost_sight(job: BulkJob, run_id: int) -> bool:
    """Whether job `job`'s person, who could see run `run_id` when the job started, may no
    longer see it, by the permission rule read from the database now
    (runs.permissions.run_access). An account no longer active is not told so: every action
    of it is refused as forbidden, saying why."""
    if job.sight is None:
        return False  # its batches list only the runs its person may see then
    access = run_access(job.requested_by, VIEW, run_id)
    return access is not None and not access.allowed and not access.account_inactive


def _matching(grant: Grant, filters: RunFilters):
    if not grant.everywhere and not grant.workflow_ids:
        return Run.objects.none()
    return runs_matching(filters, workflow_ids=None if grant.everywhere else grant.workflow_ids)
