from django.apps import AppConfig


class ArchiveConfig(AppConfig):
    name = "archive"
    verbose_name = "Retention and archival"

    def ready(self):
        from audit.chain import register_tombstone_check
        from audit.checkpoints import register_archive_files, register_archived_heads
        from audit.offline import register_catalogue
        from runs.machine.retention import register_archived_lookup

        from .models import ArchivedRun
        from .reading import recorded_archive
        from .selectors import (
            archived_for_key,
            archived_heads,
            recorded_file_digests,
            recorded_files,
            tombstones_against_their_files,
        )

        # start_run keeps the business keys of archived runs closed (runs.machine.retention).
        register_archived_lookup(archived_for_key, table=ArchivedRun._meta.db_table)
        # verify_audit --archive compares a file with what was recorded when it was written.
        register_catalogue(recorded_archive)
        # A checkpoint's check judges a run archived since by the head its file closed.
        register_archived_heads(archived_heads)
        # A checkpoint names every archive file recorded: a database restored to before one
        # was written no longer records it.
        register_archive_files(recorded_files, recorded_file_digests)
        # verify_audit names a run removed through a tombstone its file does not back.
        register_tombstone_check(tombstones_against_their_files)
