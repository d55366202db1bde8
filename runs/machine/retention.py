"""Business keys whose run was archived: how start_run keeps them closed.

A run's identity is (workflow name, business key), and the unique constraint on Run protects
it only while the row exists. The archive app (above runs in the layers: it reads runs and
approvals) moves finished runs out of the hot tables into archive files and leaves a
tombstone per run, written in the transaction that deletes the run's rows. start_run asks
the lookup the archive app registers here (in its AppConfig.ready) inside its own
transaction, so a late delivery of a start event is answered with the archived run
(runs.machine.errors.RunArchived) instead of starting the work again. runs imports nothing from
archive; without the archive app nothing is ever archived and there is nothing to ask.

The lookup takes (workflow name, business key) and returns the tombstone or None. A
tombstone has original_run_id, final_status, input_hash, finished_at and archive_file
(with its name).
"""

from collections.abc import Callable

_lookup: Callable[[str, str], object | None] | None = None
_table: str | None = None


def register_archived_lookup(lookup: Callable[[str, str], object | None], *,
                             table: str | None = None) -> None:
    """`table` names the tombstones' table (columns workflow_name and business_key, unique
    together): start_run's insert then checks it in its own statement instead of asking
    `lookup` first, and calls `lookup` only to explain a refusal."""
    global _lookup, _table
    _lookup, _table = lookup, table


def archived_table() -> str | None:
    """The tombstones' table registered with the lookup, or None."""
    return _table if _lookup is not None else None


def archived_run(workflow: str, business_key: str):
    """The tombstone of the archived run of (workflow, business key), or None."""
    return _lookup(workflow, business_key) if _lookup is not None else None
