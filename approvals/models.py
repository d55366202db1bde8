"""Durable approval requests, who may decide them, and the notifications that ask.

A request's life: `pending` until a person decides it (`approved` / `rejected`), nobody does
in time (`rejected` by the timeout policy, or `expired`: the run goes to attention), its
payload changes (`superseded` by a newer request), or the run stops waiting on it for
another reason (`withdrawn`). A decision is claimed on the request first and applied to the
run afterwards (runs' transitions commit on their own); `settled_at` says it reached the
run, or could not and why (`apply_error`). A request is *open* until it is settled: at most
one open request exists per run and step (or per run and operator action).

Rows here change only through the approvals app's writers: requests, decisions, schedule,
notifications, timeouts and four_eyes.
"""

from django.conf import settings
from django.db import models
from django.db.models import Q
from guardian.models import GroupObjectPermissionBase, UserObjectPermissionBase

from runs.models import OF_REAL_WORK

DECIDE_CODENAME = "decide_approvalrequest"
DECIDE_PERMISSION = f"approvals.{DECIDE_CODENAME}"


class RequestKind(models.TextChoices):
    STEP = "step", "approval step"
    OPERATOR_ACTION = "operator_action", "operator action (four eyes)"
    TOOL_CALL = "tool_call", "agent tool call"


class RequestStatus(models.TextChoices):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"
    SUPERSEDED = "superseded"
    WITHDRAWN = "withdrawn"


DECIDED_STATUSES = frozenset({RequestStatus.APPROVED, RequestStatus.REJECTED,
                              RequestStatus.EXPIRED})


# The requests of bulk jobs, in a query (ApprovalRequest.bulk_runs: of one request).
BULK_JOB_REQUESTS = Q(params__has_key="bulk_job")
# The requests of real work (runs.models.OF_REAL_WORK), which the metrics count: a drill
# run's are left out, a bulk job's kept whatever run it hangs on (the first it acts on,
# which may be a drill's, while the job acts on real runs too).
OF_REAL_WORK_REQUESTS = BULK_JOB_REQUESTS | OF_REAL_WORK


class ApprovalRequest(models.Model):
    kind = models.CharField(max_length=16, choices=RequestKind.choices, default=RequestKind.STEP)
    run = models.ForeignKey("runs.Run", on_delete=models.PROTECT,
                            related_name="approval_requests")
    # The approval step this request asks about (kind "step"), or the agent step whose tool
    # call it asks about (kind "tool_call": the call itself below, its ref and the hash of
    # its arguments in params)...
    step_name = models.CharField(max_length=200, blank=True)
    # No database constraint or index (an added foreign key would scan the table under a
    # lock): requests are found by run, and a run's requests are removed before its calls.
    tool_call = models.ForeignKey("runs.ToolCall", null=True, blank=True,
                                  on_delete=models.DO_NOTHING, db_constraint=False,
                                  db_index=False, related_name="+")
    # ...or the operator action a second person must approve (kind "operator_action"),
    # its parameters and who asked for it (who therefore may not decide it).
    action = models.CharField(max_length=100, blank=True)
    params = models.JSONField(default=dict, blank=True)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                     on_delete=models.SET_NULL, related_name="+")

    # What is to be approved, as a person sees it, and the sha256 of its canonical JSON.
    # A request's snapshot never changes: a changed payload makes a new request.
    snapshot = models.JSONField()
    snapshot_hash = models.CharField(max_length=64)

    status = models.CharField(max_length=16, choices=RequestStatus.choices,
                              default=RequestStatus.PENDING)
    # Why the approvers could not all be resolved or notified (an unknown group, a user
    # without an email address): shown to operators, never fatal.
    problem = models.TextField(blank=True)

    # The policy, copied from the step's declaration when the request is made so that the
    # sweeper never depends on the code of the moment.
    approvers = models.JSONField(default=list)          # "user:ann", "group:finance"
    escalate_to = models.JSONField(default=list, blank=True)
    remind_every = models.DurationField(null=True, blank=True)
    timeout = models.DurationField()
    on_timeout = models.CharField(max_length=16)        # escalate / reject / cancel / expire
    escalation_level = models.PositiveSmallIntegerField(default=0)

    requested_at = models.DateTimeField()
    due_at = models.DateTimeField()
    next_reminder_at = models.DateTimeField(null=True, blank=True)
    reminder_count = models.PositiveIntegerField(default=0)

    # The decision. decision_id comes from the form the person submitted: the same form
    # sent twice carries the same id and is recognised.
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    decided_by_label = models.CharField(max_length=200, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_id = models.UUIDField(null=True, blank=True, unique=True)
    comment = models.TextField(blank=True)
    superseded_by = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT,
                                      related_name="supersedes")

    # Applying the decision to the run (or running the operator action).
    settled_at = models.DateTimeField(null=True, blank=True)
    apply_after = models.DateTimeField(null=True, blank=True)
    apply_attempts = models.PositiveIntegerField(default=0)
    apply_error = models.TextField(blank=True)

    class Meta:
        default_permissions = ("view",)
        permissions = [(DECIDE_CODENAME, "Can decide approval requests")]
        constraints = [
            # One open request per run and step (or operator action): two sweeps racing to
            # open one make one, and a decided request blocks a new one until it is settled.
            models.UniqueConstraint(
                fields=["run", "kind", "step_name", "action"],
                condition=Q(settled_at__isnull=True), name="approval_one_open_request",
            ),
        ]
        indexes = [
            # The sweeper's queries: what is due, what needs a reminder, what is decided
            # but not yet applied. Partial, so their cost follows the number of due rows.
            models.Index(fields=["due_at"], name="approval_pending_due_idx",
                         condition=Q(status="pending")),
            models.Index(fields=["next_reminder_at"], name="approval_reminder_due_idx",
                         condition=Q(status="pending")),
            models.Index(fields=["apply_after"], name="approval_unsettled_idx",
                         condition=Q(settled_at__isnull=True) & ~Q(status="pending")),
            # A tool call's open request, by its call: whether a call the run waits on has
            # been asked costs one look, not a read of every open tool-call request.
            models.Index(fields=["tool_call"], name="approval_open_call_idx",
                         condition=Q(settled_at__isnull=True, tool_call__isnull=False)),
            # The admin's filters, newest first: a status or a kind few requests have was
            # found by reading every request.
            models.Index(fields=["status", "id"], name="approval_status_idx"),
            models.Index(fields=["kind", "id"], name="approval_kind_idx"),
        ]

    def __str__(self):
        subject = self.step_name or self.action
        return f"approval request {self.pk} ({subject}, {self.status})"

    @property
    def is_pending(self) -> bool:
        return self.status == RequestStatus.PENDING

    # Of a bulk job's request read for its page (approvals.selectors.request_for_page): how
    # many runs it acts on, counted by the database, which left the lists of them out of
    # its params and snapshot. None: read whole.
    runs_counted: int | None = None

    @property
    def bulk_runs(self) -> list[int]:
        """The runs a bulk job's request acts on once approved (it hangs on the first of
        them only because a request belongs to a run); [] for any other request."""
        if self.runs_counted is not None:
            raise ValueError(f"approval request {self.pk} was read without its runs "
                             "(request_for_page): ask bulk_run_count")
        params = dict(self.params or {})
        return list(params.get("runs") or []) if params.get("bulk_job") else []

    @property
    def bulk_run_count(self) -> int:
        """How many runs a bulk job's request acts on; 0 for any other request."""
        return self.runs_counted if self.runs_counted is not None else len(self.bulk_runs)

    @property
    def is_bulk(self) -> bool:
        """Whether it is a bulk job's request (bulk_runs)."""
        return self.bulk_run_count > 0

    @property
    def subject(self) -> str:
        """What is asked, in a few words: a bulk job's request says how many runs it acts
        on, never only the run it hangs on."""
        if self.kind == RequestKind.OPERATOR_ACTION:
            if self.is_bulk:
                return (f"operator action: {self.action} of {self.bulk_run_count} runs "
                        f"(bulk job {self.params['bulk_job']})")
            return f"operator action: {self.action}"
        if self.kind == RequestKind.TOOL_CALL:
            return f"{self.step_name}: tool {self.params.get('tool', '?')} " \
                   f"(call {self.params.get('tool_call', '?')})"
        return self.step_name

    @property
    def target_step(self) -> str:
        """The step the request is about: an operator action's step (rerun_from_step keeps
        it in params, its step_name is empty), else step_name. The API and the approver's
        page both show this one."""
        return str(dict(self.params or {}).get("step") or self.step_name)

    @property
    def current_approvers(self) -> list[str]:
        """Who may decide now: the approvers, and the deputies once escalated."""
        names = list(self.approvers)
        if self.escalation_level:
            names += [n for n in self.escalate_to if n not in names]
        return names


class ApprovalRequestUserObjectPermission(UserObjectPermissionBase):
    """Guardian object permissions with a real foreign key: the inbox joins them by index."""

    content_object = models.ForeignKey(ApprovalRequest, on_delete=models.CASCADE)


class ApprovalRequestGroupObjectPermission(GroupObjectPermissionBase):
    content_object = models.ForeignKey(ApprovalRequest, on_delete=models.CASCADE)


class NotificationStatus(models.TextChoices):
    PENDING = "pending"
    SENT = "sent"
    FAILED = "failed"       # gave up after the last attempt
    # The request no longer waits for anyone, or the recipient may no longer decide it:
    # nothing to ask them.
    SKIPPED = "skipped"


class NotificationKind(models.TextChoices):
    REQUEST = "request"
    REMINDER = "reminder"
    ESCALATION = "escalation"


class Notification(models.Model):
    """The outbox: one email to one recipient, written in the transaction that made it
    necessary and delivered by the sweeper's publisher, with retries."""

    request = models.ForeignKey(ApprovalRequest, on_delete=models.PROTECT,
                                related_name="notifications")
    kind = models.CharField(max_length=16, choices=NotificationKind.choices)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                             on_delete=models.SET_NULL, related_name="+")
    recipient = models.EmailField()
    subject = models.CharField(max_length=300)
    # The text without the link: the signed link is made when the email is sent, so that
    # it is fresh and no usable link rests in the database.
    body = models.TextField()
    status = models.CharField(max_length=16, choices=NotificationStatus.choices,
                              default=NotificationStatus.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField()
    # The Message-ID header, fixed when the row is made: every attempt carries the same one,
    # so a resend after a crash between sending and recording is recognisable downstream.
    message_id = models.CharField(max_length=300)
    # What the provider answered (SMTP and Django's other backends give nothing back, so
    # this is the Message-ID as sent): stored once delivery succeeded.
    provider_message_id = models.CharField(max_length=300, blank=True)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField()
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        default_permissions = ("view",)
        indexes = [
            models.Index(fields=["next_attempt_at"], name="notification_due_idx",
                         condition=Q(status="pending")),
            # The admin's filters, newest first (the failed ones, the escalations: a few
            # among the sent requests and reminders).
            models.Index(fields=["status", "id"], name="notification_status_idx"),
            models.Index(fields=["kind", "id"], name="notification_kind_idx"),
        ]

    def __str__(self):
        return f"{self.kind} to {self.recipient} ({self.status})"


class BulkJobStatus(models.TextChoices):
    RUNNING = "running"
    DONE = "done"
    CANCELLED = "cancelled"


class BulkJobPhase(models.TextChoices):
    """What a running job's worker does: act on the runs its filter matched, then (the
    second person approved its request) take the action on the runs that waited for them."""

    ACTING = "acting", "acting on its runs"
    APPLYING = "applying", "applying the approval"


class BulkJob(models.Model):
    """One operator action on every run a filter matched when the job started, worked
    through in the background a batch at a time (approvals.bulk). Its runs are those that
    matched then (ids up to `last_run_id`); `cursor` is the last run id looked at. Rows
    change only through approvals.bulk."""

    action = models.CharField(max_length=100)
    filters = models.JSONField(default=dict)
    reason = models.TextField()
    params = models.JSONField(default=dict, blank=True)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT,
                                     related_name="+")
    status = models.CharField(max_length=16, choices=BulkJobStatus.choices,
                              default=BulkJobStatus.RUNNING)
    phase = models.CharField(max_length=16, choices=BulkJobPhase.choices,
                             default=BulkJobPhase.ACTING, db_default=BulkJobPhase.ACTING)
    total = models.PositiveIntegerField(default=0)
    last_run_id = models.BigIntegerField(default=0)
    cursor = models.BigIntegerField(default=0)
    # A worker holds the job until then; past it (the worker died) another takes it over.
    lease_until = models.DateTimeField(null=True, blank=True)
    # The one four-eyes request for the runs that need a second person, once made.
    approval = models.ForeignKey("ApprovalRequest", null=True, blank=True,
                                 on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    cancelled_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                     on_delete=models.SET_NULL, related_name="+")
    # The preview's own mark, sent with the form that starts the job: that form sent twice
    # (a double click, a resend after a timeout) starts one job.
    start_key = models.CharField(max_length=64, blank=True, default="", db_default="")
    # What its person could see when it started (runs.permissions.Grant of view_runs:
    # {"everywhere": bool, "workflow_ids": [...]}): its runs are those, and one they lost
    # sight of since is told apart from one that left the filter. None: a job started by
    # the release before, which kept no such record.
    sight = models.JSONField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["lease_until"], name="bulk_job_running_idx",
                                condition=Q(status="running"))]
        constraints = [models.UniqueConstraint(fields=["requested_by", "start_key"],
                                               name="bulk_job_started_once",
                                               condition=~Q(start_key=""))]

    def __str__(self):
        return f"bulk {self.action} #{self.pk}"


class BulkOutcome(models.Model):
    """What the job did with one run. Written (as `claimed`) before the action and
    completed after it: the unique constraint is what keeps a job from acting twice on a
    run, whatever crashes in between (approvals.bulk recovers a claimed row from the
    run's audit trail)."""

    class Outcome(models.TextChoices):
        CLAIMED = "claimed"
        DONE = "done"
        SECOND_PERSON = "second_person", "waits for a second person"
        REFUSED = "refused"
        FORBIDDEN = "forbidden"
        # Its person may no longer see it (they could when the job started): counted, and
        # never named, since they may not see it.
        NOT_VISIBLE = "not_visible", "no longer visible to its person"

    job = models.ForeignKey(BulkJob, on_delete=models.CASCADE, related_name="outcomes")
    run_id = models.BigIntegerField()
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    message = models.TextField(blank=True)
    at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job", "run_id"],
                                               name="bulk_one_outcome_per_run")]

    def __str__(self):
        return f"{self.job}: run {self.run_id} {self.outcome}"
