"""Archive files, removals and tombstones in Django admin, read-only. The heads a file or a
removal keeps (one per run, ARCHIVE_RUNS_PER_FILE of them in a file) are shown as a count and
the first few: the whole JSON made a page of every run's head, and each list naming a file
(the tombstones', the removals') read all of them again for each of its rows. One run's head
is on its tombstone's page. So are the runs a file kept in the hot tables."""

import heapq
from urllib.parse import urlencode

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from audit.admin import ReadOnlyAdmin, choices_filter
from runs.admin import console_run_url, workflow_names
from runs.admin_search import NUMBER, PREFIX, IndexedSearchAdmin
from runs.models import FINAL_RUN_STATUSES

from .models import ArchivedRun, ArchiveFile, ArchiveRemoval
from .selectors import archived_head

# The heads a file's or a removal's page lists, lowest run id first.
HEADS_SHOWN = 20


def run_order(run_id: str):
    """Run ids (a heads' keys, strings) in the order of their numbers."""
    return (0, int(run_id), "") if run_id.isascii() and run_id.isdigit() else (1, 0, run_id)


def heads_summary(heads: dict) -> str:
    """How many chain heads `heads` holds and the first HEADS_SHOWN of them by run id, each
    run's id a search of the tombstones for it (whose page shows its head), escaped."""
    heads = heads or {}
    first = heapq.nsmallest(HEADS_SHOWN, heads, key=run_order)
    tombstones = reverse("admin:archive_archivedrun_changelist")
    listed = format_html_join(
        "", '<li><a href="{}?{}">run {}</a>: seq {}, hash {}</li>',
        ((tombstones, urlencode({"q": run_id}), run_id, *shown_head(heads[run_id]))
         for run_id in first))
    more = len(heads) - len(first)
    return format_html(
        "{} chain heads{}.<ul>{}</ul>{}", f"{len(heads):,}",
        f", the first {len(first)} by run id" if more else "", listed,
        format_html('{} more: a run\'s head is on its <a href="{}">archived run</a>\'s '
                    "page (search its id).", f"{more:,}", tombstones) if more else "")


def kept_runs_summary(run_ids: list) -> str:
    """How many runs of a file stayed in the hot tables and the first HEADS_SHOWN by id, each
    a link to its console page (as the admin's other run links), escaped: a file kept
    thousands when its removal met an incident's reopened runs."""
    run_ids = run_ids or []
    if not run_ids:
        return "none"
    first = heapq.nsmallest(HEADS_SHOWN, run_ids, key=lambda pk: run_order(str(pk)))
    listed = format_html_join(", ", '<a href="{}">run {}</a>',
                              ((_run_page(pk), pk) for pk in first))
    more = len(run_ids) - len(first)
    return format_html("{} runs stayed in the hot tables (changed before their removal; a "
                       "later file archives them){}: {}{}", f"{len(run_ids):,}",
                       f", the first {len(first)} by id" if more else "", listed,
                       f"; {more:,} more" if more else "")


def _run_page(pk) -> str:
    try:
        return console_run_url(pk)
    except (TypeError, ValueError):
        return "#"


def shown_head(head) -> tuple[object, object]:
    """(seq, hash) of a stored head, [seq, hash]; anything else shown as it is."""
    if isinstance(head, list) and len(head) == 2:
        return head[0], head[1]
    return head, ""


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
    exclude = ["heads", "kept_run_ids"]
    readonly_fields = ["chain_heads", "kept_runs"]

    def get_queryset(self, request):
        # The list shows no head: its page reads none. The change page reads them once.
        return super().get_queryset(request).defer("heads", "kept_run_ids")

    @admin.display(description="heads")
    def chain_heads(self, archive):
        return heads_summary(archive.heads)

    @admin.display(description="kept runs")
    def kept_runs(self, archive):
        return kept_runs_summary(archive.kept_run_ids)


@admin.register(ArchiveRemoval)
class ArchiveRemovalAdmin(ReadOnlyAdmin):
    """The record of each removal from the hot tables: who, when, which file."""

    list_display = ["removed_at", "archive_file", "run_count", "actor"]
    list_select_related = ["archive_file"]
    # A few removals per archive file: a small table, sorted by any column.
    sortable_by = None
    exclude = ["heads"]
    readonly_fields = ["chain_heads"]

    def get_queryset(self, request):
        return super().get_queryset(request).defer(
            "heads", "archive_file__heads", "archive_file__kept_run_ids")

    @admin.display(description="heads")
    def chain_heads(self, removal):
        return heads_summary(removal.heads)


@admin.register(ArchivedRun)
class ArchivedRunAdmin(IndexedSearchAdmin, ReadOnlyAdmin):
    """Tombstones keep archived business keys closed to new runs: never edited by hand.
    A search names the start of a business key (archivedrun_key_prefix_idx) or a run's id
    (its unique index); the workflow filter offers the workflows' rows (a small table)
    rather than a DISTINCT over the tombstones, and is answered along the unique
    (workflow_name, business_key) index; the final status filter offers the statuses a run
    is archived in, along archivedrun_status_idx. A tombstone's page shows the head of the
    run's chain as its file closed it."""

    list_display = ["original_run_id", "workflow_name", "business_key", "final_status",
                    "finished_at", "archived_at", "archive_file"]
    list_filter = [choices_filter("final status", "final_status", sorted(FINAL_RUN_STATUSES)),
                   choices_filter("workflow", "workflow_name", workflow_names)]
    indexed_search = (("original_run_id", NUMBER), ("business_key", PREFIX))
    list_select_related = ["archive_file"]
    ordering = ["-id"]
    sortable_by = ["original_run_id"]
    readonly_fields = ["chain_head"]

    def get_queryset(self, request):
        # The file's name only: its heads are the file's every run's, for each row listed
        # and on the change page, whose file link would load the file whole.
        return super().get_queryset(request).select_related("archive_file").defer(
            "archive_file__heads", "archive_file__kept_run_ids")

    @admin.display(description="chain head (seq, hash)")
    def chain_head(self, tombstone):
        head = archived_head(tombstone.original_run_id)
        if head is None:
            return "(not in its file's heads)"
        return format_html("seq {}, hash {}", *head)
