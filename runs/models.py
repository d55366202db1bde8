"""Runs, their steps, and a row per registered workflow for permissions to attach to.

Only runs/machine/transitions/ changes these rows once they exist.
"""

from django.db import models
from django.db.models import Q


class RunStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    WAITING = "waiting"
    ATTENTION = "attention"
    COMPENSATING = "compensating"
    COMPLETED = "completed"
    COMPENSATED = "compensated"
    COMPENSATION_FAILED = "compensation_failed"
    TERMINATED = "terminated"


# The run-status sets, defined once for the runtime, the console, the API and the metrics.
FINAL_RUN_STATUSES = frozenset({RunStatus.COMPLETED, RunStatus.COMPENSATED, RunStatus.TERMINATED})
# A person must act (compensation_failed is not final: it is in the attention list too).
ATTENTION_RUN_STATUSES = frozenset({RunStatus.ATTENTION, RunStatus.COMPENSATION_FAILED})
# A worker may hold the run's lease.
HELD_RUN_STATUSES = frozenset({RunStatus.RUNNING, RunStatus.COMPENSATING})
# The rows that hang from a run (its steps, its audit records) of real work, not of a drill
# (Run.drill): a drill breaks runs on purpose, so nothing it did is in any figure, the
# metrics' counters and durations nor archival's counts of the records it removed, which
# the counters add back. A run is a drill run from the statement that makes it, never
# after: its rows are in or out of a count for good, and a counter never goes down.
OF_REAL_WORK = Q(run__drill=False)


class StepStatus(models.TextChoices):
    PENDING = "pending"
    RUNNING = "running"
    SCHEDULED = "scheduled"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    UNKNOWN = "unknown"
    WAITING = "waiting"
    COMPENSATING = "compensating"
    COMPENSATED = "compensated"
    COMPENSATION_FAILED = "compensation_failed"
    SKIPPED = "skipped"


# A step that is over for the run going forward: counted in its steps done.
DONE_STEP_STATUSES = frozenset({StepStatus.SUCCEEDED, StepStatus.SKIPPED})


class AttentionReason(models.TextChoices):
    UNKNOWN_OUTCOME = "unknown_outcome", "unknown outcome not settled"
    PERMANENT_ERROR = "permanent_error", "permanent error"
    BUDGET_EXHAUSTED = "budget_exhausted", "retry budget exhausted"
    MODEL_OUTPUT_PAUSED = "model_output_paused", "model output paused"
    UNCLASSIFIED_ERROR = "unclassified_error", "unexpected error"
    APPROVAL_TIMED_OUT = "approval_timed_out", "approval timed out"
    APPROVAL_REJECTED = "approval_rejected", "approval rejected"
    DEFINITION_MISSING = "definition_missing", "definition missing"
    COMPENSATION_FAILED = "compensation_failed", "compensation failed"
    REOPENED = "reopened", "reopened by an operator"
    COMPENSATION_PAUSED = "compensation_paused", "undo of a high-impact step needs a person"
    EVENT_TIMED_OUT = "event_timed_out", "awaited event did not arrive in time"
    # Terminated or cancelled while an effect's outcome was unknown: the run stays with a
    # person until each such effect is settled, then it is terminated.
    ENDED_UNSETTLED = "ended_unsettled", "ended with an effect not settled"
    # Its workers stopped at the same point again and again (runs.machine.transitions.leases).
    WORKERS_KEEP_STOPPING = "workers_keep_stopping", "workers keep stopping at this point"
    # Its workflow version's input schema refuses the input it was started with.
    INPUT_REJECTED = "input_rejected", "input no longer accepted by its workflow version"
    # The approval it waits on cannot be asked for: no request, so no one could decide it.
    APPROVAL_UNASKABLE = "approval_unaskable", "approval request cannot be made"
    # An unknown outcome a person (or a lookup they ran) settled as not done: the step
    # failed with that evidence and waits for a person to send it again or end the run.
    SETTLED_NOT_DONE = "settled_not_done", "effect settled as not done"
    # A value sealed with a field key that FIELD_ENCRYPTION_KEYS does not hold (or holds with
    # another secret) could not be opened, and the cure is the key ring, not the code
    # (ErrorClass.UNREADABLE). Nothing was sent where the runtime opened it before the
    # effect; where the effect's own code opened it, it may have sent before it read
    # (runs.machine.transitions.effects.fail).
    SEALED_VALUE_UNREADABLE = "sealed_value_unreadable", "a sealed value cannot be opened"


class ErrorClass(models.TextChoices):
    TRANSIENT = "transient"
    PERMANENT = "permanent"
    UNKNOWN = "unknown"
    MODEL_FORMAT = "model_format"
    EXHAUSTED = "exhausted"
    UNCLASSIFIED = "unclassified"
    # Why an undo stands as compensation failed when a person ended its run while it was
    # under way (runs.machine.transitions.in_flight): in flight then, its outcome unknown
    # until its sender brings it; or an agent step's, its calls undone only so far. Each
    # its own value, so that what a late result may settle is never read from a message.
    ENDED_IN_DOUBT = "ended_in_doubt"
    ENDED_UNDOING = "ended_undoing"
    # A permanent error whose receiver holds an earlier request under the key, with other
    # arguments (HTTP 422 idempotency_key_reused): a lookup by the key finds that request's
    # effect, never this one's, so it settles nothing (lookup_verdicts.looked_up_verdict).
    KEY_REUSED = "key_reused"
    # A sealed value (runs.machine.sensitive) could not be opened (errors.classify). Opened
    # by the runtime before the effect, nothing was sent; opened by the effect's own code, it
    # may have sent before it read (effects.fail says which).
    UNREADABLE = "unreadable"


class Workflow(models.Model):
    """One row per workflow name: the object that per-workflow permissions attach to."""

    name = models.CharField(max_length=200, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        permissions = [
            ("view_runs", "Can view runs of this workflow"),
            ("resume_run", "Can resume runs"),
            ("reconcile_run", "Can reconcile steps"),
            ("retry_step", "Can retry a step"),
            ("compensate_run", "Can compensate runs"),
            ("terminate_run", "Can cancel and terminate runs"),
            ("pause_dispatch", "Can pause and resume a workflow's dispatch and schedules"),
        ]

    def __str__(self):
        return self.name


class Run(models.Model):
    workflow = models.ForeignKey(Workflow, on_delete=models.PROTECT, related_name="runs")
    workflow_name = models.CharField(max_length=200)
    workflow_version = models.PositiveIntegerField()
    business_key = models.CharField(max_length=300)
    input = models.JSONField()
    input_hash = models.CharField(max_length=64)
    status = models.CharField(max_length=32, choices=RunStatus.choices, default=RunStatus.QUEUED)
    attention_reason = models.CharField(max_length=32, choices=AttentionReason.choices, blank=True)
    status_message = models.TextField(blank=True)
    current_step = models.CharField(max_length=200, blank=True)
    # current_step while the run is not held by a worker, NULL while it is (running or
    # compensating): the runs list's order by step reads it along run_listed_step_idx. It
    # changes only with the run's status, so a step's checkpoint still updates the run in
    # place (HOT). Kept by the database (triggers of migration 0035), never written here.
    listed_step = models.CharField(max_length=200, null=True, blank=True, editable=False)
    step_count = models.PositiveIntegerField(default=0)
    steps_done = models.PositiveIntegerField(default=0)
    # The attempt generation: 0 as started, +1 at each re-run from a chosen step (the steps
    # sent again carry it in their keys, runs.machine.keys).
    generation = models.PositiveIntegerField(default=0, db_default=0)
    cancel_requested = models.BooleanField(default=False)
    # Started by the drill kit (runs.operator.drills): kept out of the console's lists and attention
    # count unless asked for, notifies nobody, removed by `manage.py remove_drill_runs`.
    drill = models.BooleanField(default=False, db_default=False)

    # Lease and fencing: a worker owns the run while its lease lasts; every claim or takeover
    # increments the token, and an outcome is recorded only under the token it was claimed with.
    fencing_token = models.PositiveBigIntegerField(default=0)
    lease_owner = models.CharField(max_length=200, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # When a waiting run is due again (retry backoff, timer).
    next_wake_at = models.DateTimeField(null=True, blank=True)

    # Head of this run's audit hash chain, and its keyed seal ("key id:HMAC" over the run,
    # seq and head, audit.head_seals): the hashes alone can be recomputed by whoever
    # rewrites the chain in the database, the seal cannot without AUDIT_SEAL_KEYS. NULL
    # until a head is written: a NOT NULL column would make SQLite (the demo) rebuild the
    # table to add it, dropping its triggers (runs 0035).
    audit_seq = models.PositiveIntegerField(default=0)
    audit_head = models.CharField(max_length=64, blank=True)
    audit_seal = models.TextField(null=True, blank=True)

    created_at = models.DateTimeField()
    # When the status last changed (step progress within a status does not count).
    updated_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["workflow_name", "business_key"], name="run_unique_business_key"
            ),
        ]
        indexes = [
            models.Index(fields=["status", "updated_at"], name="run_status_updated_idx"),
            # The runs list: newest status change first, keyset-paged on (updated_at, id).
            models.Index(fields=["-updated_at", "-id"], name="run_updated_idx"),
            # What is held, and so what is stuck (held past its lease): the runs held now,
            # as many as workers run at once, whatever the number of runs. Keyed on id, not
            # on lease_expires_at: each step extends the lease, and an indexed column that
            # changes makes the run's update write an entry in every index of the table
            # (not HOT); the lease is read from the rows this index finds.
            models.Index(fields=["id"], name="run_held_idx",
                         condition=Q(status__in=["running", "compensating"])),
            # What is due: waiting (or compensating) runs whose time has come.
            models.Index(fields=["next_wake_at"], name="run_wake_due_idx",
                         condition=Q(status__in=["waiting", "compensating"])),
            # Queued runs nobody picked up (a lost broker message).
            models.Index(fields=["updated_at"], name="run_queued_idx",
                         condition=Q(status="queued")),
            # The attention list, and the runs list filtered to runs in attention: its page
            # of ids (keyset on updated_at, id) is read from this index alone.
            models.Index(fields=["updated_at", "id"], name="run_attention_keyset_idx",
                         condition=Q(status__in=["attention", "compensation_failed"])),
            # The same, without drill runs (what the console shows unless asked): its count
            # and page stay index-only with drill runs left out.
            models.Index(fields=["updated_at", "id"], name="run_attention_live_idx",
                         condition=Q(status__in=["attention", "compensation_failed"],
                                     drill=False)),
            # Runs not finished, by status, workflow and reason: the metrics count them from
            # this index alone (index-only scans), at the cost of the open runs, whatever
            # the number of finished ones.
            models.Index(fields=["status", "workflow_name", "attention_reason"],
                         name="run_open_work_idx",
                         condition=Q(status__in=["queued", "running", "waiting", "attention",
                                                 "compensating", "compensation_failed"],
                                     drill=False)),
            # Search by the start of a business key (LIKE 'q%' under any collation).
            models.Index(fields=["business_key"], name="run_business_key_prefix_idx",
                         opclasses=["varchar_pattern_ops"]),
            # Search by the end of a business key ("INV-1847" finds "tenant-42:INV-1847")
            # reads run_business_key_suffix_idx, on reverse(business_key) text_pattern_ops:
            # the reversed key starts with the reversed search. It is made by migration
            # 0020 in SQL (PostgreSQL only), not declared here: Django renders an operator
            # class on an expression only with django.contrib.postgres installed.
            # The runs list sorted by creation, keyset-paged on (created_at, id) along this
            # (sorted by workflow it pages along the unique (workflow_name, business_key),
            # by status along run_status_updated_idx). No index may name current_step (or
            # any column a step's progress changes): each step's checkpoint updates the run
            # in place (HOT) only while none of its indexed columns change (listed_step
            # stays NULL while steps progress).
            models.Index(fields=["created_at", "id"], name="run_created_idx"),
            # The runs not held by a worker in the order of their step (keyset (step, id));
            # the held ones, few, are sorted beside them (runs.reads.selectors).
            models.Index(fields=["listed_step", "id"], name="run_listed_step_idx",
                         condition=models.Q(listed_step__isnull=False)),
        ]

    def __str__(self):
        return f"{self.workflow_name} {self.business_key}"

    @property
    def is_final(self) -> bool:
        return self.status in FINAL_RUN_STATUSES


class Step(models.Model):
    # No index of its own: the unique (run, name) index starts with run.
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="steps", db_index=False)
    name = models.CharField(max_length=200)
    position = models.PositiveIntegerField()
    kind = models.CharField(max_length=16)
    impact = models.CharField(max_length=8)
    version = models.PositiveIntegerField()
    status = models.CharField(max_length=32, choices=StepStatus.choices, default=StepStatus.PENDING)
    idempotency_key = models.CharField(max_length=64)
    # The run generation this step's current state (and key) belongs to.
    generation = models.PositiveIntegerField(default=0, db_default=0)
    attempt = models.PositiveIntegerField(default=0)
    # Attempts counted against the retry budget start here; an operator retry resets it.
    budget_attempt_base = models.PositiveIntegerField(default=0)
    budget_started_at = models.DateTimeField(null=True, blank=True)
    format_failures = models.PositiveIntegerField(default=0)
    # What the step will do, in one line, as computed when its intent was recorded.
    intended_action = models.TextField(blank=True, default="", db_default="")
    # Failed lookups by key since the outcome became unknown (a lookup is a read: retried).
    lookup_failures = models.PositiveIntegerField(default=0)
    # A step with the stop verdict (runs.definitions.contracts.effect_verdict) runs only the attempt
    # a person approved: this is that attempt's number, 0 while none is approved.
    approved_attempt = models.PositiveIntegerField(default=0, db_default=0)
    # The compensation is its own action with its own key, attempts and evidence.
    compensation_key = models.CharField(max_length=64, blank=True)
    compensation_attempt = models.PositiveIntegerField(default=0)
    compensation_ref = models.CharField(max_length=300, blank=True)
    remote_ref = models.CharField(max_length=300, blank=True)
    result = models.JSONField(null=True, blank=True)
    error_class = models.CharField(max_length=16, choices=ErrorClass.choices, blank=True)
    error_message = models.TextField(blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    lease_owner = models.CharField(max_length=200, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    # When the attempt now in flight (or the last one) began: the intent checkpoint is this
    # row, and the record of the attempt's outcome carries this time
    # (runs.machine.transitions.kernel).
    attempt_started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField()

    class Meta:
        # A step's update is HOT (in place, no index entries written) only when no indexed
        # column changes, predicates included: no index here may name status (or any
        # column a step's progress changes). The approval steps runs wait on are found
        # from their own table, ApprovalWait.
        constraints = [
            models.UniqueConstraint(fields=["run", "name"], name="step_unique_run_name"),
        ]
        indexes = [
            # Exact keys and key prefixes (the 12 characters a page shows) are found along
            # step_key_head_idx, on the key's first KEY_HEAD characters (text_pattern_ops):
            # made by migration 0044 in SQL (PostgreSQL only), not declared here, as
            # run_business_key_suffix_idx (see Run.Meta).
            models.Index(fields=["remote_ref"], name="step_remote_ref_idx",
                         condition=~Q(remote_ref="")),
            models.Index(fields=["compensation_ref"], name="step_compensation_ref_idx",
                         condition=~Q(compensation_ref="")),
            # The console's "last error" column and error-class filter: few steps have one.
            models.Index(fields=["run", "error_class"], name="step_error_idx",
                         condition=~Q(error_class="")),
            # The agent steps of a run (their turns and calls hang from them): the agent
            # metrics count those of the open and recently finished runs at every scrape
            # (observability.agent_metrics). A step's kind never changes: still HOT.
            models.Index(fields=["run", "id"], name="step_agent_idx",
                         condition=Q(kind="agent")),
        ]
        ordering = ["run_id", "position"]

    def __str__(self):
        return f"{self.run_id}/{self.name}"


class RunEvent(models.Model):
    """A change of a run's status, or a step's outcome, written in the transaction of the
    transition that made it: the outbox from which progress events reach subscribers
    (api.webhooks)."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="events",
                            db_index=False)
    status_from = models.CharField(max_length=32)
    status_to = models.CharField(max_length=32)
    # Set for a step's outcome (the audit action that recorded it); empty for a status change.
    step_name = models.CharField(max_length=200, blank=True, default="", db_default="")
    outcome = models.CharField(max_length=40, blank=True, default="", db_default="")
    created_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["run", "id"], name="runevent_run_idx")]

    def __str__(self):
        return f"run {self.run_id}: {self.status_from} -> {self.status_to}"


class ApprovalWait(models.Model):
    """A person's decision a run waits on: an approval step, or an agent's tool call
    (tool_call set). Inserted in the transaction in which the run starts waiting for it,
    deleted in the one in which the run stops waiting (runs.machine.transitions.kernel, _Change):
    the approvals sweep reads these few rows instead of searching the steps, and no index
    of runs_step has to name a step's status."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="approval_waits")
    step_name = models.CharField(max_length=200)
    # Deleted with its run (a tool call goes only with its step, and so its run); no index:
    # the table holds the waits of the moment, a handful.
    tool_call = models.ForeignKey("runs.ToolCall", on_delete=models.CASCADE, null=True,
                                  blank=True, related_name="+", db_index=False)
    created_at = models.DateTimeField()
    # Set by the approvals sweep when this wait's request failed to open for a reason it
    # cannot tell from a passing one: how many times in a row, and since when
    # (approvals.open_failures).
    open_failures = models.IntegerField(default=0, db_default=0)
    failing_since = models.DateTimeField(null=True, blank=True)

    def __str__(self):
        return f"run {self.run_id} waits on {self.step_name}" + (
            f" (tool call {self.tool_call_id})" if self.tool_call_id else "")


# The record of agent steps (their turns and tool calls) lives in its own module.
from .agent_models import AgentTurn, ToolCall, ToolCallStatus  # noqa: E402, F401

# The registry of worker processes, from their heartbeats.
from .worker_models import Worker  # noqa: E402, F401

# Schedules, dispatch pauses and their control records (runs.waiting.schedules,
# runs.machine.dispatch).
from .world_models import (  # noqa: E402, F401
    ControlRecord,
    DispatchPause,
    ExternalEvent,
    PassPosition,
    ScheduleState,
)
