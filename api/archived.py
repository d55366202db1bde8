"""The answer about a run the token may see that is no longer in the hot tables: 410
`run_archived` naming its archive file (a run that finished and was archived), else 404.
Every operation on one run answers so, not only the run's state: a client that follows a
run by its id learns once, wherever it asks, that it is gone for good and where it is."""

from django.urls import reverse
from ninja import Status

from archive.selectors import gone_to_archive

from . import selectors
from .errors import error_body


def archived_body(request, tombstone, *, same_input: bool | None = None) -> dict:
    return {"id": tombstone.original_run_id, "workflow": tombstone.workflow_name,
            "business_key": tombstone.business_key, "final_state": tombstone.final_status,
            "finished_at": tombstone.finished_at, "archived_at": tombstone.archived_at,
            "archive_file": tombstone.archive_file.name, "same_input": same_input,
            "console_url": request.build_absolute_uri(
                reverse("console:archived_run", args=[tombstone.original_run_id]))}


def run_not_here(request, token, run_id: int) -> Status:
    """410 for a run of the token's workflows that was archived, else 404."""
    tombstone = selectors.visible_archived_run(run_id, workflows=token.workflows or [])
    if tombstone is not None:
        return Status(410, {**error_body("run_archived", gone_to_archive(tombstone)),
                            "archived_run": archived_body(request, tombstone)})
    return Status(404, error_body("run_not_found", f"no run {run_id} for this token"))
