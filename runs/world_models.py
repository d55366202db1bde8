"""Rows for waiting on the world and sharing it fairly: each declared schedule's progress
(the last slot it handled, whether it is paused, whether its ticks fail), where a windowed
pass stopped, the pauses of a workflow's dispatch, and the append-only record of who paused
or resumed what, and why.

None of these is a run's or a step's state: a schedule starts runs through start_run, a
pause only keeps the runtime from claiming runs (runs.machine.dispatch)."""

from django.db import models


class ScheduleState(models.Model):
    """The progress of one declared schedule (runs.waiting.schedules.Schedule), shared by every
    scheduler: the slots up to last_slot_at are handled."""

    workflow_name = models.CharField(max_length=200)
    name = models.CharField(max_length=200)
    last_slot_at = models.DateTimeField(null=True, blank=True)
    last_run_id = models.BigIntegerField(null=True, blank=True)
    paused = models.BooleanField(default=False)
    pause_reason = models.TextField(blank=True)
    paused_by = models.CharField(max_length=200, blank=True)
    # Its trouble (runs.waiting.schedule_health): since which tick every tick has failed
    # (null while healthy), how many ticks in a row, and the last one's error, shortened and
    # masked. A tick that starts or finds a run clears them.
    failing_since = models.DateTimeField(null=True, blank=True)
    failures = models.PositiveIntegerField(default=0, db_default=0)
    last_error = models.TextField(blank=True, default="", db_default="")
    # Whether that trouble is its last slot handled lying ahead of the clock (the clock set
    # back, the row edited): unlike a failed tick, it ends when the clock catches up, with
    # no run started, so the tick that sees it caught up must know which trouble it was.
    ahead_of_clock = models.BooleanField(default=False, db_default=False)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workflow_name", "name"],
                                    name="schedule_state_unique_name"),
        ]

    def __str__(self):
        return f"{self.workflow_name} schedule {self.name}"


class PassPosition(models.Model):
    """Where a periodic pass that goes over a table a window at a time stopped, shared by
    every worker and kept over restarts, so that the next pass, wherever it runs, goes on
    from there (runs.waiting.kept.consume_kept_events: the kept events)."""

    job = models.CharField(max_length=100, primary_key=True)
    after_id = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField()

    def __str__(self):
        return f"{self.job} after {self.after_id}"


class DispatchPause(models.Model):
    """A workflow whose dispatch is paused: for every step (system empty), or only for the
    steps that reach one remote system. Deleted on resume; the history stays in
    ControlRecord."""

    workflow_name = models.CharField(max_length=200)
    system = models.CharField(max_length=200, blank=True, default="")
    reason = models.TextField()
    paused_by = models.CharField(max_length=200)
    paused_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workflow_name", "system"],
                                    name="dispatch_pause_unique"),
        ]

    def __str__(self):
        return f"{self.workflow_name} paused" + (f" for {self.system}" if self.system else "")


class ControlRecordQuerySet(models.QuerySet):
    def update(self, **kwargs):
        raise ControlRecordAppendOnly("control records are append-only: update refused")

    def delete(self):
        raise ControlRecordAppendOnly("control records are append-only: delete refused")


class ControlRecordAppendOnly(Exception):
    pass


class ControlRecord(models.Model):
    """Who paused or resumed a workflow's dispatch or a schedule, when and why, and when a
    schedule began failing and recovered (the scheduler, runs.waiting.schedule_health).
    These are about a workflow, not one run, so they sit outside the runs' audit chains,
    append-only like them."""

    action = models.CharField(max_length=40)
    workflow_name = models.CharField(max_length=200)
    # The remote system of a dispatch pause, or the schedule's name.
    target = models.CharField(max_length=200, blank=True, default="")
    actor_label = models.CharField(max_length=200)
    actor_user_id = models.BigIntegerField(null=True, blank=True)
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField()

    objects = ControlRecordQuerySet.as_manager()

    class Meta:
        indexes = [models.Index(fields=["workflow_name", "id"], name="control_workflow_idx")]

    def __str__(self):
        return f"{self.action} {self.workflow_name} {self.target}".strip()

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise ControlRecordAppendOnly(f"control record {self.pk} is append-only")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise ControlRecordAppendOnly(f"control record {self.pk} is append-only")


class ExternalEvent(models.Model):
    """An event from another system (POST /api/events, a signed webhook, or a person),
    stored in the transaction of the transition that consumes it, or kept until a run
    waits for it. Its id per source makes a redelivery change nothing."""

    workflow_name = models.CharField(max_length=200)
    source = models.CharField(max_length=100)
    event_id = models.CharField(max_length=200)
    event_name = models.CharField(max_length=200)
    correlation_key = models.CharField(max_length=300)
    payload = models.JSONField(default=dict)
    received_at = models.DateTimeField()
    consumed_run_id = models.BigIntegerField(null=True, blank=True)
    consumed_step = models.CharField(max_length=200, blank=True, default="")
    consumed_at = models.DateTimeField(null=True, blank=True)
    # What a step waiting for it holds in remote_ref (transitions.events.awaiting_ref),
    # written with the row (transitions.events.insert_event): the one form every lookup of
    # a kept event compares with the waiting step's, never rebuilt in a query.
    awaited_ref = models.CharField(max_length=300, blank=True, default="", db_default="")
    # A kept event the run it is for cannot take (its version's schema refuses the payload,
    # or a person ended that run): said once, when first met (runs.waiting.kept), and never
    # tried again. refused_run_id with no refused_at: a kept event passed over by the run a
    # person ended, still kept for the next run of its correlate() key (kept.pass_over).
    refused_at = models.DateTimeField(null=True, blank=True)
    refused_run_id = models.BigIntegerField(null=True, blank=True)
    refused_reason = models.TextField(blank=True, default="", db_default="")
    # Until when a kept event waits for its run (RUNS_EVENT_KEEP_SECONDS past received_at,
    # by the database's clock), written as it is kept; null on an event delivered as it came.
    # Past it, the event expires (runs.waiting.kept_expiry): expired_at is set, once, and
    # no path delivers it, so that an event no run reached is not taken months later by a
    # run that happens to wait under the same key.
    keep_until = models.DateTimeField(null=True, blank=True)
    expired_at = models.DateTimeField(null=True, blank=True)
    # The sha256 of the payload as its sender sent it (redacted as it is stored): an id sent
    # again with another payload is refused (runs.waiting.events), not answered "duplicate"
    # while what the sender meant is dropped. Empty on events a person delivered, and on
    # those received before it was written.
    payload_digest = models.CharField(max_length=64, blank=True, default="", db_default="")
    # "key id:HMAC-SHA256" of the whole payload as sent, redacted fields in clear, with a key
    # of RUNS_EVENT_DIGEST_KEYS: a change in a redacted field is refused too, and no secret
    # can be recovered from the row (a plain hash of a PIN is undone by trying each one).
    # Empty where payload_digest is, and on events received before it was written.
    payload_mac = models.CharField(max_length=300, blank=True, default="", db_default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workflow_name", "source", "event_id"],
                                    name="external_event_unique_id"),
        ]
        indexes = [
            # The events kept for a run that does not wait for them yet, found by the
            # reference of the wait (a run beginning to wait, a person's delivery, and the
            # sweeper's pass where the waiting steps are fewer than its window): few.
            models.Index(fields=["awaited_ref", "workflow_name"],
                         name="external_event_kept_ref_idx",
                         condition=models.Q(consumed_at__isnull=True,
                                            refused_at__isnull=True)),
            # The sweeper's pass over them, batch after batch by id (runs.waiting.kept):
            # an expired row leaves it, so the pass's cost stops following old events.
            models.Index(fields=["id"], name="external_event_kept_order_idx",
                         condition=models.Q(consumed_at__isnull=True,
                                            expired_at__isnull=True)),
            # The kept rows due to expire, soonest first (runs.waiting.kept_expiry), and
            # those an older release kept without keep_until (the nulls, at its end).
            models.Index(fields=["keep_until"], name="external_event_keep_until_idx",
                         condition=models.Q(consumed_at__isnull=True,
                                            expired_at__isnull=True)),
            # The expired ones by when, for the metric of those expired since its recount.
            models.Index(fields=["expired_at"], name="external_event_expired_idx",
                         condition=models.Q(expired_at__isnull=False)),
            # Kept rows without their reference (written by a release before the column):
            # none once filled, so the pass's look for them costs nothing.
            models.Index(fields=["id"], name="external_event_no_ref_idx",
                         condition=models.Q(consumed_at__isnull=True, awaited_ref="")),
        ]

    def __str__(self):
        return f"{self.source}:{self.event_id} {self.event_name} ({self.correlation_key})"

    @property
    def state(self) -> str:  # one row's; EVENT_STATES says it in SQL
        """What became of the event: "delivered" (consumed by a run, or settled by a person's
        delivery or skip), "expired" (past its keep time, never delivered), "refused" (for
        the run it came for) or "kept" (for the run that will wait for it)."""
        if self.consumed_at is not None:
            return "delivered"
        if self.expired_at is not None:
            return "expired"
        return "refused" if self.refused_at is not None else "kept"


# What became of an event, in SQL (ExternalEvent.state says it of one row): the one rule the
# sweeper's passes, the transitions, the metrics and the admin read it by. The partial
# indexes above spell it out again, as migrations must. UNSETTLED: neither delivered nor
# expired, so still a run's to take (unless refused for its run).
UNSETTLED = models.Q(consumed_at__isnull=True, expired_at__isnull=True)
EVENT_STATES = {
    "kept": UNSETTLED & models.Q(refused_at__isnull=True),
    "expired": models.Q(expired_at__isnull=False),
    "refused": UNSETTLED & models.Q(refused_at__isnull=False),
    "delivered": models.Q(consumed_at__isnull=False),
}
