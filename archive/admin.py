from django.contrib import admin

from audit.admin import ReadOnlyAdmin, choices_filter
from runs.admin import workflow_names
from runs.admin_search import NUMBER, PREFIX, IndexedSearchAdmin
from runs.models import FINAL_RUN_STATUSES

from .models import ArchivedRun, ArchiveFile, ArchiveRemoval


@admin.register(ArchiveFile)
class ArchiveFileAdmin(ReadOnlyAdmin):
    """Written only by archive.archiving: an edited sha256 or chain head would make a good
    file fail verification, a deleted row would orphan its tombstones."""

    list_display = ["name", "run_count", "record_count", "size", "sha256", "created_at",
                    "created_by", "removal_finished_at"]
    search_fields = ["name", "sha256"]
    date_hierarchy = "created_at"
    # A file per archiving pass: a small table, sorted by any column.
    sortable_by = None


@admin.register(ArchiveRemoval)
class ArchiveRemovalAdmin(ReadOnlyAdmin):
    """The record of each removal from the hot tables: who, when, which file."""

    list_display = ["removed_at", "archive_file", "run_count", "actor"]
    list_select_related = ["archive_file"]
    # A few removals per archive file: a small table, sorted by any column.
    sortable_by = None


@admin.register(ArchivedRun)
class ArchivedRunAdmin(IndexedSearchAdmin, ReadOnlyAdmin):
    """Tombstones keep archived business keys closed to new runs: never edited by hand.
    A search names the start of a business key (archivedrun_key_prefix_idx) or a run's id
    (its unique index); the workflow filter offers the workflows' rows (a small table)
    rather than a DISTINCT over the tombstones, and is answered along the unique
    (workflow_name, business_key) index; the final status filter offers the statuses a run
    is archived in, along archivedrun_status_idx."""

    list_display = ["original_run_id", "workflow_name", "business_key", "final_status",
                    "finished_at", "archived_at", "archive_file"]
    list_filter = [choices_filter("final status", "final_status", sorted(FINAL_RUN_STATUSES)),
                   choices_filter("workflow", "workflow_name", workflow_names)]
    indexed_search = (("original_run_id", NUMBER), ("business_key", PREFIX))
    list_select_related = ["archive_file"]
    ordering = ["-id"]
    sortable_by = ["original_run_id"]
