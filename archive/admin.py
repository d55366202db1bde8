from django.contrib import admin

from audit.admin import ReadOnlyAdmin

from .models import ArchivedRun, ArchiveFile, ArchiveRemoval


@admin.register(ArchiveFile)
class ArchiveFileAdmin(ReadOnlyAdmin):
    """Written only by archive.archiving: an edited sha256 or chain head would make a good
    file fail verification, a deleted row would orphan its tombstones."""

    list_display = ["name", "run_count", "record_count", "size", "sha256", "created_at",
                    "created_by", "removal_finished_at"]
    search_fields = ["name", "sha256"]
    date_hierarchy = "created_at"


@admin.register(ArchiveRemoval)
class ArchiveRemovalAdmin(ReadOnlyAdmin):
    """The record of each removal from the hot tables: who, when, which file."""

    list_display = ["removed_at", "archive_file", "run_count", "actor"]
    list_select_related = ["archive_file"]


@admin.register(ArchivedRun)
class ArchivedRunAdmin(ReadOnlyAdmin):
    """Tombstones keep archived business keys closed to new runs: never edited by hand."""

    list_display = ["original_run_id", "workflow_name", "business_key", "final_status",
                    "finished_at", "archived_at", "archive_file"]
    list_filter = ["final_status", "workflow_name"]
    search_fields = ["business_key", "=original_run_id"]
    list_select_related = ["archive_file"]
