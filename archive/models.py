"""Archive files and the record of each removal from the hot tables.

An ArchiveFile row is written once its file is in storage (name, sha256, size) and before
any hot row is removed; it keeps the head (seq, hash) of every audit chain the file closes.
Each transaction that then removes runs from the hot tables adds an ArchiveRemoval row
(who, when, which file, which runs and chain heads) and a tombstone per run (ArchivedRun).
Neither is an audit record: a run's audit records are removed with it, this log is not.
"""

from django.db import models

from runs.models import RunStatus, Workflow


class ArchiveFile(models.Model):
    # The name in the archive storage (STORAGES "archive", else VAR_DIR/archive).
    name = models.CharField(max_length=500, unique=True)
    sha256 = models.CharField(max_length=64, unique=True)
    size = models.PositiveBigIntegerField()
    run_count = models.PositiveIntegerField()
    record_count = models.PositiveIntegerField()
    # The runs' finish times: the period the file covers.
    first_finished_at = models.DateTimeField(null=True)
    last_finished_at = models.DateTimeField(null=True)
    # Run id (a string) -> [seq, hash]: the head of each audit chain the file closes.
    heads = models.JSONField()
    created_at = models.DateTimeField()
    created_by = models.CharField(max_length=200)
    # Set once every run of the file was removed from the hot tables or kept there (below).
    removal_finished_at = models.DateTimeField(null=True, blank=True)
    # Runs written to the file that changed before their removal (an operator reopened a
    # terminated run): they stay in the hot tables, and a later file archives them again.
    kept_run_ids = models.JSONField(default=list, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["created_at"], name="archivefile_unfinished_idx",
                         condition=models.Q(removal_finished_at__isnull=True)),
        ]

    def __str__(self):
        return self.name


class ArchiveRemoval(models.Model):
    """One transaction that removed runs of an archive file from the hot tables."""

    archive_file = models.ForeignKey(ArchiveFile, on_delete=models.PROTECT,
                                     related_name="removals")
    removed_at = models.DateTimeField()
    actor = models.CharField(max_length=200)
    run_count = models.PositiveIntegerField()
    # Run id (a string) -> [seq, hash] of the audit chains removed.
    heads = models.JSONField()
    # Audit action -> records of it this removal deleted, those of drill runs left out
    # (runs.models.OF_REAL_WORK): the metrics' counters are counts of audit records of real
    # work and must not go down when records leave for an archive.
    audit_actions = models.JSONField(null=True, blank=True)

    def __str__(self):
        return f"{self.run_count} runs of {self.archive_file} removed by {self.actor}"


class ArchivedRun(models.Model):
    """What stays of a run in the database once it is archived: a tombstone.

    It keeps the run's identity (workflow, business key) closed after the run row is gone:
    start_run asks for it (runs.machine.retention) and answers a late start event with this run
    instead of starting the work again. It is also what the console searches by business
    key, and what the audit trigger checks before it lets the archival path delete a run's
    records. Written only in the transaction that deletes the run's hot rows.
    """

    original_run_id = models.BigIntegerField(unique=True)
    # Permissions attach to the workflow row, as for hot runs.
    workflow = models.ForeignKey(Workflow, on_delete=models.PROTECT, related_name="+")
    workflow_name = models.CharField(max_length=200)
    workflow_version = models.PositiveIntegerField()
    business_key = models.CharField(max_length=300)
    input_hash = models.CharField(max_length=64)
    final_status = models.CharField(max_length=32, choices=RunStatus.choices)
    created_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    archived_at = models.DateTimeField()
    archive_file = models.ForeignKey(ArchiveFile, on_delete=models.PROTECT,
                                     related_name="archived_runs")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workflow_name", "business_key"],
                                    name="archivedrun_unique_business_key"),
        ]
        indexes = [
            # The console's search by the start of a business key, as for hot runs.
            models.Index(fields=["business_key"], name="archivedrun_key_prefix_idx",
                         opclasses=["varchar_pattern_ops"]),
            # The admin's filter by final status, newest first: the compensated and the
            # terminated runs are a few among the completed ones.
            models.Index(fields=["final_status", "id"], name="archivedrun_status_idx"),
        ]

    def __str__(self):
        return f"{self.workflow_name} {self.business_key} (archived run {self.original_run_id})"
