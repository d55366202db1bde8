"""The apps that hold rows of a run, asked to write and remove their own.

Each app that keeps rows of a run has an `archival` module (as each app has its `admin`
module for the admin site) with:

- ORDER: removal order, lowest first (rows that point at others go first: audit records,
  approval requests and webhook deliveries before the runs they belong to);
- ARCHIVED: its models written to the file; TRANSIENT: {model: why it is not}; a test
  (tests/archive/test_parts.py) fails for any model linked to runs in neither;
- rows(run_ids) -> {run id: {part name: rows}}, read in the archive's snapshot;
- remove(run_ids), called in the removal transaction, after the tombstones are written;
- optionally pending(run_ids) -> set of run ids: the runs that app still has work for
  (api: webhook deliveries not yet sent), which stay in the hot tables for a later pass.
  It is asked about one batch of candidate runs at a time, never the whole table.

The archive app finds them through the installed apps, so it names no other app's tables
and imports nothing above it."""

from functools import cache
from importlib import import_module
from types import ModuleType

from django.apps import apps
from django.utils.module_loading import module_has_submodule

MODULE = "archival"


@cache
def parts() -> tuple[ModuleType, ...]:
    found = [import_module(f"{config.name}.{MODULE}") for config in apps.get_app_configs()
             if module_has_submodule(config.module, MODULE)]
    return tuple(sorted(found, key=lambda module: module.ORDER))


def rows(run_ids: list[int]) -> dict[int, dict]:
    """Every part of each run that still exists, by run id (the run's own row as "run")."""
    merged: dict[int, dict] = {}
    for part in parts():
        for run_id, sections in part.rows(run_ids).items():
            merged.setdefault(run_id, {}).update(sections)
    return {run_id: sections for run_id, sections in merged.items() if "run" in sections}


def pending(run_ids: list[int]) -> set[int]:
    """The runs of `run_ids` that some app still has work for: not to be archived yet."""
    held: set[int] = set()
    for part in parts():
        check = getattr(part, "pending", None)
        ids = [pk for pk in run_ids if pk not in held]
        if check is not None and ids:
            held |= set(check(ids))
    return held


def remove(run_ids: list[int]) -> None:
    for part in parts():
        part.remove(run_ids)
