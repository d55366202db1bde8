"""System checks of the runs app that read the database (Django runs them with
`check --database`, and `migrate` before it migrates)."""

from django.core import checks
from django.db import DatabaseError


@checks.register(checks.Tags.database)
def workflow_code_works_the_runs_in_flight(app_configs=None, databases=None, **kwargs):
    """runs.W001 for each workflow version with runs in flight that this code cannot work
    (runs.operator.release_check)."""
    if not databases:
        return []
    from .operator.release_check import unworkable_versions

    try:
        found = unworkable_versions()
    except DatabaseError:
        return []  # not migrated yet: no run is in flight
    return [checks.Warning(str(version), id="runs.W001",
                           hint="see docs/operations.md, 'Releasing workflow code'")
            for version in found]
