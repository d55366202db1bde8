"""API tokens: how other systems authenticate to the integration API.

A token is `dwf_<prefix>_<secret>`. The prefix (not secret) finds the row; the sha256 of the
whole token is compared in constant time. Only the hash is stored: the plaintext is shown to
the admin once, when the token is created, and exists nowhere afterwards. A token starts and
reads runs of the workflows it names, and nothing else; it never opens the console.

Rows change only through api/tokens.py (and the admin's edit of a token's scope, limit and
expiry).
"""

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models

from audit.redaction import API_TOKEN_NAME, api_token_label


class ApiToken(models.Model):
    # Audit records name the token as "api-token:<name>" (api_token_label): names are unique
    # and tokens are revoked rather than deleted, so a name always means one token. The
    # redaction keeps that label whole for names of exactly these characters.
    name = models.CharField(
        max_length=100, unique=True,
        validators=[RegexValidator(f"^{API_TOKEN_NAME}$",
                                   "lower-case letters, digits, '.', '_' and '-'")],
        help_text="Who uses it, e.g. 'erp-prod'. Audit records name it as api-token:NAME.")
    prefix = models.CharField(max_length=16, unique=True, editable=False)
    hashed = models.CharField(max_length=64, editable=False,
                              help_text="sha256 of the whole token (hex)")
    workflows = models.JSONField(
        default=list, blank=True,
        help_text="Names of the workflows this token may start and read runs of (none: "
                  "nothing).")
    rate_limit = models.PositiveIntegerField(
        null=True, blank=True,
        help_text="Requests allowed per rate-limit window; empty: the API_RATE_LIMIT "
                  "setting.")
    created_at = models.DateTimeField()
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    # The person the token acts for in operator actions and approval decisions, with that
    # person's permissions (within the token's workflows) and named as that person in the
    # audit trail. None: the token starts and reads runs only.
    # No index: a few rows per deployment, and a user's deletion is its only reverse lookup.
    acting_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT,
        related_name="api_tokens", db_index=False,
        help_text="The person this token acts for in operator actions and approval "
                  "decisions (with their permissions, within the token's workflows). Empty: "
                  "the token only starts and reads runs.")
    # Updated at most once a minute (API_TOKEN_LAST_USED_PRECISION_SECONDS) so that reads
    # do not each write.
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    # A leaked token that nobody revoked stops working on its own. New tokens get
    # API_TOKEN_DEFAULT_DAYS; an admin may set another moment, or none.
    expires_at = models.DateTimeField(
        null=True, blank=True,
        help_text="From this moment the token is refused (401). Empty: it never expires.")

    class Meta:
        verbose_name = "API token"
        ordering = ["name"]

    def __str__(self):
        return self.name

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    def is_expired(self, now) -> bool:
        return self.expires_at is not None and now >= self.expires_at

    @property
    def actor_label(self) -> str:
        """How audit records and logs name this token."""
        return api_token_label(self.name)

    def may_use(self, workflow: str) -> bool:
        return workflow in (self.workflows or [])


class WebhookSubscriber(models.Model):
    """A system that wants the progress events of runs, registered by an admin."""

    name = models.CharField(max_length=100, unique=True)
    url = models.URLField(max_length=500)
    # Signs each delivery (HMAC-SHA256 over timestamp and body); never sent, never shown once
    # saved. Stored sealed with the field encryption key in use (api.subscribers.
    # sealed_secret: "enc:<key id>:<Fernet token>"), so a copy of the database does not
    # sign; opened only to sign (signing_secret).
    secret = models.CharField(max_length=400)
    # The secret `secret` replaced, sealed alike, and until when it still signs beside it
    # (WEBHOOK_SECRET_OVERLAP_HOURS from the replacement, api.subscribers.subscriber_save):
    # a receiver switches to the new secret within that time without refusing a delivery.
    # Empty and None: no overlap. Removed by the publisher once the time has passed.
    previous_secret = models.CharField(max_length=400, blank=True, default="", db_default="")
    previous_secret_until = models.DateTimeField(null=True, blank=True)
    workflows = models.JSONField(default=list, blank=True,
                                 help_text="workflow names; empty means every workflow")
    active = models.BooleanField(default=True)
    # Status-change events (runs.RunEvent) up to this id have been turned into deliveries
    # for this subscriber.
    last_event_id = models.BigIntegerField(default=0)
    # Likewise the audit records of step outcomes up to this id: a step's outcome is told
    # from its record in the run's chain, not from a second row written for subscribers.
    last_record_id = models.BigIntegerField(default=0, db_default=0)
    # The holes (ids missing below ids already visible) each cursor waits at, as the
    # publisher last judged them (api.webhook_cursors.CursorState): every id up to
    # `holes_upto` was drawn before `holes_seen_at`; `holes_horizon` (a PostgreSQL
    # transaction id, xid8), taken a few seconds later, is above the id of every transaction
    # that drew one. None: no hole waits. Written by the publisher only, with its cursors.
    event_holes_upto = models.BigIntegerField(null=True, blank=True)
    event_holes_seen_at = models.DateTimeField(null=True, blank=True)
    event_holes_horizon = models.BigIntegerField(null=True, blank=True)
    record_holes_upto = models.BigIntegerField(null=True, blank=True)
    record_holes_seen_at = models.DateTimeField(null=True, blank=True)
    record_holes_horizon = models.BigIntegerField(null=True, blank=True)
    # How far each cursor's rows are read (api.webhook_cursors.CursorState): every row up to
    # `queued_through` has its delivery or is no news to the subscriber, save the ids of
    # `holes_missing` ([first, last] runs, missing when last read, read again each pass). None:
    # up to the cursor, and no hole. Written by the publisher only, with its cursors.
    event_queued_through = models.BigIntegerField(null=True, blank=True)
    event_holes_missing = models.JSONField(null=True, blank=True)
    record_queued_through = models.BigIntegerField(null=True, blank=True)
    record_holes_missing = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return self.name


class WebhookDelivery(models.Model):
    """One event for one subscriber, with every attempt to deliver it: a run's status change
    (event) or a step's outcome (record, its audit record)."""

    class Status(models.TextChoices):
        PENDING = "pending"
        DELIVERED = "delivered"
        FAILED = "failed"

    subscriber = models.ForeignKey(WebhookSubscriber, on_delete=models.PROTECT,
                                   related_name="deliveries")
    event = models.ForeignKey("runs.RunEvent", on_delete=models.CASCADE, null=True,
                              blank=True, related_name="deliveries")
    # No index of its own: the unique (subscriber, record) below serves the lookups. No
    # database constraint either: adding one would scan the table under a lock, and records
    # leave only with their run's deliveries (archive.parts).
    record = models.ForeignKey("audit.AuditRecord", on_delete=models.CASCADE, null=True,
                               blank=True, related_name="+", db_index=False,
                               db_constraint=False)
    # Sent with every attempt, so that a receiver can drop a redelivery it already has.
    delivery_id = models.UUIDField(unique=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField()
    last_status_code = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "webhook deliveries"
        constraints = [
            models.UniqueConstraint(fields=["subscriber", "event"],
                                    name="webhook_one_delivery_per_event"),
            models.UniqueConstraint(fields=["subscriber", "record"],
                                    condition=models.Q(record__isnull=False),
                                    name="webhook_one_delivery_per_record"),
        ]
        indexes = [models.Index(fields=["next_attempt_at"], name="webhook_due_idx",
                                condition=models.Q(status="pending")),
                   # durable_webhook_failed counts these at every scrape: without it, a
                   # scrape read every delivery the hot tables hold (events x subscribers).
                   models.Index(fields=["id"], name="webhook_failed_idx",
                                condition=models.Q(status="failed")),
                   # The admin's list of pending deliveries, newest first: without it, a
                   # page of them read the whole backlog (along webhook_due_idx, then
                   # sorted), or every delivery newer than it along the primary key.
                   models.Index(fields=["id"], name="webhook_pending_idx",
                                condition=models.Q(status="pending"))]

    def __str__(self):
        return f"{self.delivery_id} to {self.subscriber}"
