"""Tables of the simulated external systems, one group per system.

They stand for other companies' databases: the runtime never reads them, and workflows reach
them only over HTTP through demo.clients. Each system keeps the guarantees its real
counterpart would offer, enforced by the database rather than by a check-then-insert, so that
concurrent retries from several workers behave as they would against the real thing: the
tracker, the customer system and the payment system deduplicate on an idempotency key, the
ledger on a transaction reference, and the messenger not at all.
"""

import re
from decimal import Decimal

from django.db import IntegrityError, models, transaction
from django.utils import timezone


class RemoteObject(models.Model):
    """An object of a remote system, known to its clients by a prefixed reference
    ("TASK-12") rather than by our primary key."""

    PREFIX = ""

    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        abstract = True

    def __str__(self):
        return self.ref

    @property
    def ref(self) -> str:
        return f"{self.PREFIX}-{self.pk}"

    @classmethod
    def pk_from_ref(cls, ref: str) -> int | None:
        match = re.fullmatch(rf"{cls.PREFIX}-(\d{{1,18}})", ref or "")
        return int(match.group(1)) if match else None


# The task tracker -------------------------------------------------------------------------


class Task(RemoteObject):
    """An approval task. Created at most once per idempotency key."""

    PREFIX = "TASK"
    OPEN, CANCELLED = "open", "cancelled"

    idempotency_key = models.CharField(max_length=200, unique=True)
    title = models.CharField(max_length=300)
    assignee = models.CharField(max_length=200)
    details = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=20, default=OPEN,
                              choices=[(OPEN, "open"), (CANCELLED, "cancelled")])
    cancel_reason = models.TextField(blank=True)
    cancel_key = models.CharField(max_length=200, blank=True)
    cancelled_at = models.DateTimeField(null=True, blank=True)

    def as_json(self) -> dict:
        return {"id": self.ref, "status": self.status, "title": self.title,
                "assignee": self.assignee, "details": self.details,
                "idempotency_key": self.idempotency_key, "cancel_reason": self.cancel_reason,
                "created_at": self.created_at.isoformat()}

    @classmethod
    def cancel(cls, pk: int, *, reason: str, key: str) -> "Task":
        """Cancel the task; cancelling a cancelled task changes nothing (the first reason
        stays), so a compensation retried with its key is harmless."""
        with transaction.atomic():
            task = cls.objects.select_for_update().get(pk=pk)
            if task.status != cls.CANCELLED:
                task.status = cls.CANCELLED
                task.cancel_reason = reason
                task.cancel_key = key
                task.cancelled_at = timezone.now()
                task.save(update_fields=["status", "cancel_reason", "cancel_key",
                                         "cancelled_at"])
        return task


# The messenger ----------------------------------------------------------------------------


class Message(RemoteObject):
    """A sent message. The messenger does not deduplicate: it records the client's
    reference, by which a sender can look up what it sent."""

    PREFIX = "MSG"

    client_reference = models.CharField(max_length=200, blank=True, db_index=True)
    recipient = models.CharField(max_length=300)
    subject = models.CharField(max_length=300, blank=True)
    body = models.TextField(blank=True)

    def as_json(self) -> dict:
        return {"id": self.ref, "to": self.recipient, "subject": self.subject,
                "body": self.body, "client_reference": self.client_reference,
                "created_at": self.created_at.isoformat()}


# The ledger -------------------------------------------------------------------------------


class LedgerRefused(Exception):
    """The ledger refused an entry; nothing was written."""


class LedgerEntry(RemoteObject):
    """A ledger entry. Entries are never changed or deleted: a mistake is undone by a
    reversing entry, and each entry can be reversed at most once (the one-to-one field makes
    the database refuse a second reversal, even from two concurrent callers)."""

    PREFIX = "LE"

    transaction_ref = models.CharField(max_length=200, unique=True)
    account = models.CharField(max_length=100)
    amount = models.DecimalField(max_digits=14, decimal_places=2)
    currency = models.CharField(max_length=3, default="EUR")
    memo = models.CharField(max_length=500, blank=True)
    reverses = models.OneToOneField("self", null=True, blank=True, on_delete=models.PROTECT,
                                    related_name="reversed_by")

    class Meta:
        verbose_name_plural = "ledger entries"

    def as_json(self) -> dict:
        return {"id": self.ref, "transaction_ref": self.transaction_ref,
                "account": self.account, "amount": f"{self.amount:.2f}",
                "currency": self.currency, "memo": self.memo,
                "reverses": self.reverses.ref if self.reverses_id else None,
                "created_at": self.created_at.isoformat()}

    @classmethod
    def post(cls, *, transaction_ref: str, account: str, amount: Decimal, currency: str,
             memo: str, reverses: str | None) -> tuple["LedgerEntry", bool]:
        """Post an entry once per transaction reference: (entry, created). A repeated
        reference returns the original entry. Raises LedgerRefused for a reversal the ledger
        does not accept."""
        existing = cls.objects.filter(transaction_ref=transaction_ref).first()
        if existing:
            return existing, False
        target = cls._reversal_target(reverses, amount, currency) if reverses else None
        try:
            with transaction.atomic():
                entry = cls.objects.create(transaction_ref=transaction_ref, account=account,
                                           amount=amount, currency=currency, memo=memo,
                                           reverses=target)
        except IntegrityError:
            # Lost a race: either the same reference was posted concurrently (return it) or
            # another reference reversed the same entry first (refuse).
            existing = cls.objects.filter(transaction_ref=transaction_ref).first()
            if existing:
                return existing, False
            raise LedgerRefused(f"{reverses} has already been reversed") from None
        return entry, True

    @classmethod
    def _reversal_target(cls, reverses: str, amount: Decimal, currency: str) -> "LedgerEntry":
        pk = cls.pk_from_ref(reverses)
        target = cls.objects.filter(pk=pk).select_related("reversed_by").first() if pk else None
        if target is None:
            raise LedgerRefused(f"cannot reverse {reverses}: no such entry")
        reversal = getattr(target, "reversed_by", None)
        if reversal is not None:
            raise LedgerRefused(f"{reverses} has already been reversed by {reversal.ref} "
                                f"(transaction_ref {reversal.transaction_ref})")
        if amount != -target.amount or currency != target.currency:
            raise LedgerRefused(f"a reversal of {reverses} must be {-target.amount:.2f} "
                                f"{target.currency}")
        return target


# The customer and payment systems ---------------------------------------------------------


class Customer(RemoteObject):
    """A customer account, created at most once per idempotency key."""

    PREFIX = "CUS"

    idempotency_key = models.CharField(max_length=200, unique=True)
    email = models.EmailField()
    name = models.CharField(max_length=200)
    plan = models.CharField(max_length=40)

    def as_json(self) -> dict:
        return {"id": self.ref, "email": self.email, "name": self.name, "plan": self.plan,
                "idempotency_key": self.idempotency_key,
                "created_at": self.created_at.isoformat()}


class PaymentUpdate(RemoteObject):
    """A change of a customer's payment status, applied at most once per idempotency key."""

    PREFIX = "PAY"

    idempotency_key = models.CharField(max_length=200, unique=True)
    customer_id = models.CharField(max_length=64)
    status = models.CharField(max_length=40)

    def as_json(self) -> dict:
        return {"id": self.ref, "customer_id": self.customer_id, "status": self.status,
                "idempotency_key": self.idempotency_key,
                "created_at": self.created_at.isoformat()}


# The model endpoint -----------------------------------------------------------------------


class ModelCall(RemoteObject):
    """One chat completion served, so that tests and operators can count model calls (a
    stored decision must never ask the model again). The API key is never recorded."""

    PREFIX = "chatcmpl-sandbox"

    model = models.CharField(max_length=100)
    prompt = models.TextField()
    content = models.TextField()
    malformed = models.BooleanField(default=False)


# Fault injection --------------------------------------------------------------------------


class Fault(models.Model):
    """A fault queued for an endpoint: its next `remaining` calls get `kind`. Which
    endpoints and kinds exist, and what each does, is demo.sandbox.faults's business."""

    endpoint = models.CharField(max_length=40)
    kind = models.CharField(max_length=40)
    remaining = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at", "pk"]
        indexes = [models.Index(fields=["endpoint", "created_at"], name="sandbox_fault_queue")]
        # Queueing a fault changes what the sandbox does to every workflow that calls it:
        # a permission of its own (superusers have it), not merely being staff.
        permissions = [("queue_fault", "Can queue a fault through /sandbox/faults")]

    def __str__(self):
        return f"{self.endpoint}: {self.kind} x{self.remaining}"

    def as_json(self) -> dict:
        return {"id": self.pk, "endpoint": self.endpoint, "kind": self.kind,
                "remaining": self.remaining, "created_at": self.created_at.isoformat()}
