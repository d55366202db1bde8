"""The append-only audit trail: one log per run, chained by hashes.

The log is the run's history, the console's timeline and the auditors' record at once;
there is no second event table. Records are built only by audit.chain.build_record and
written by the transitions (runs.machine.transitions.kernel, Change.audit), inside the
transaction of the change they describe.
"""

from django.db import models

from .actions import ROUTINE_ACTIONS


class AppendOnlyError(Exception):
    """Raised on any attempt to change or remove an audit record."""


class AuditQuerySet(models.QuerySet):
    def update(self, **kwargs):
        raise AppendOnlyError("audit records are append-only: update refused")

    def delete(self):
        raise AppendOnlyError("audit records are append-only: delete refused")


class AuditRecord(models.Model):
    class ActorKind(models.TextChoices):
        SYSTEM = "system"
        USER = "user"

    # The run whose log this is. A string reference keeps audit free of imports from runs.
    # No index of its own: the unique (run, seq) index starts with run.
    run = models.ForeignKey("runs.Run", on_delete=models.PROTECT, related_name="audit_records",
                            db_index=False)
    seq = models.PositiveIntegerField()
    action = models.CharField(max_length=64)
    step_name = models.CharField(max_length=200, blank=True)
    actor_kind = models.CharField(max_length=16, choices=ActorKind.choices)
    # A label and an id rather than a foreign key: deleting a user must never need to
    # touch (and so be refused by) the append-only log.
    actor_label = models.CharField(max_length=200)
    actor_user_id = models.BigIntegerField(null=True, blank=True)
    reason = models.TextField(blank=True)
    before = models.JSONField(default=dict, blank=True)
    after = models.JSONField(default=dict, blank=True)
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField()
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64)

    objects = AuditQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "seq"], name="audit_unique_run_seq"),
        ]
        # Records are appended in time order, so the primary key orders them by time too:
        # the audit page pages by id and needs no index on created_at.
        indexes = [
            # Finding the uncommon records (a retry, an unknown outcome, an operator's
            # action) among all: the audit page's filter and the metrics' counters. Leaving
            # out the routine ones keeps it a fraction of the log and its writes.
            models.Index(fields=["action", "id"], name="audit_uncommon_action_idx",
                         condition=~models.Q(action__in=[str(a) for a in ROUTINE_ACTIONS])),
            # The records of what people did, newest first (the admin's filter by actor
            # kind): a few among the system's, which would otherwise be found by reading the
            # whole log.
            models.Index(fields=["id"], name="audit_person_idx",
                         condition=models.Q(actor_kind="user")),
            # The console's audit page filtered by a person's name, newest first: their few
            # records among millions, read along this index instead of the log backwards to
            # its start. Partial like the one above: a system record's insert writes nothing
            # to it (no WAL for the steps).
            models.Index(fields=["actor_label", "id"], name="audit_person_label_idx",
                         condition=models.Q(actor_kind="user")),
        ]
        ordering = ["run_id", "seq"]

    def __str__(self):
        return f"run {self.run_id} #{self.seq} {self.action}"

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise AppendOnlyError(f"audit record {self.pk} is append-only: update refused")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise AppendOnlyError(f"audit record {self.pk} is append-only: delete refused")


class AccessRecord(models.Model):
    """A change to who may do what: an object or global permission, a group membership,
    staff or superuser status, an API token created or revoked. These belong to no run,
    so they form a chain of their own, appended by audit.access.record_access_change,
    append-only like the runs' (the model and, on PostgreSQL, a trigger refuse changes)."""

    seq = models.PositiveIntegerField(unique=True)
    action = models.CharField(max_length=64)
    # Whose access changed, in words ("user alice", "group operators", "token ci-deploy").
    subject = models.CharField(max_length=300)
    actor_kind = models.CharField(max_length=16, choices=AuditRecord.ActorKind.choices)
    actor_label = models.CharField(max_length=200)
    actor_user_id = models.BigIntegerField(null=True, blank=True)
    reason = models.TextField(blank=True)
    before = models.JSONField(default=dict, blank=True)
    after = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField()
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64)

    objects = AuditQuerySet.as_manager()

    class Meta:
        ordering = ["seq"]
        # The admin's searches: who acted (exactly), and what it was about (its start).
        indexes = [
            models.Index(fields=["actor_label"], name="access_actor_idx"),
            models.Index(fields=["subject"], name="access_subject_idx",
                         opclasses=["varchar_pattern_ops"]),
            # The admin's filter by action, newest first.
            models.Index(fields=["action", "seq"], name="access_action_idx"),
        ]

    def __str__(self):
        return f"access #{self.seq} {self.action} {self.subject}"

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise AppendOnlyError(f"access record {self.pk} is append-only: update refused")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise AppendOnlyError(f"access record {self.pk} is append-only: delete refused")


class AccessChainHead(models.Model):
    """The head of the access chain, one row: appending locks it, so two admins granting at
    once extend the chain one after the other instead of both from the same head."""

    seq = models.PositiveIntegerField(default=0)
    hash = models.CharField(max_length=64, blank=True)
    # The head's keyed seal (audit.head_seals), as a run's head has one: without it whoever
    # can write both tables could rewrite the chain and this row to match.
    seal = models.TextField(blank=True, default="", db_default="")

    def __str__(self):
        return f"access chain head #{self.seq}"


class StoredCheckpoint(models.Model):
    """A checkpoint of the chains' heads that beat stored outside the database
    (audit.checkpoints.store_checkpoint): its name in the checkpoint storage, when its heads
    were read (the database's clock) and how many chains it holds. The files are the evidence;
    these rows say when the last one was taken (durable_audit_checkpoint_age_seconds) without
    listing the storage."""

    name = models.CharField(max_length=255, unique=True)
    taken_at = models.DateTimeField(db_index=True)
    chains = models.PositiveIntegerField()

    def __str__(self):
        return self.name
