"""The access chain: who may do what, and every change to it.

A grant or revocation of an object or global permission, a group membership, staff or
superuser status, and an API token created or revoked each append one AccessRecord (actor,
time, reason where given, before and after) in the transaction of the change. The records
form one hash chain of their own, hashed as a run's records are (audit.chain.record_hash,
with no run and no step), and verified by `manage.py verify_audit` with the runs' chains.
"""

from collections.abc import Iterable
from enum import StrEnum

from django.db import transaction
from django.db.models.functions import Now

from .chain import GENESIS, Actor, as_stored, link_problem, record_hash
from .head_seals import ACCESS_CHAIN, seal_head, sealed_with, signing_key_id
from .models import AccessChainHead, AccessRecord
from .redaction import redact_text


class AccessAction(StrEnum):
    OBJECT_PERMISSION_GRANTED = "object_permission_granted"
    OBJECT_PERMISSION_REVOKED = "object_permission_revoked"
    GLOBAL_PERMISSIONS_CHANGED = "global_permissions_changed"
    GROUP_MEMBERSHIP_CHANGED = "group_membership_changed"
    STAFF_STATUS_CHANGED = "staff_status_changed"
    SUPERUSER_STATUS_CHANGED = "superuser_status_changed"
    # An account deactivated holds no right at all, and one made active again all it held.
    ACCOUNT_ACTIVE_CHANGED = "account_active_changed"
    # Another's password set, replaced or disabled from admin: who, whose and when, never
    # the password or its hash (an account taken over is traced by this).
    PASSWORD_CHANGED = "password_changed"
    API_TOKEN_CREATED = "api_token_created"
    API_TOKEN_REVOKED = "api_token_revoked"
    API_TOKEN_SCOPE_CHANGED = "api_token_scope_changed"
    # Where run events are sent is who gets to read them, as a token's scope is.
    WEBHOOK_SUBSCRIBER_CREATED = "webhook_subscriber_created"
    WEBHOOK_SUBSCRIBER_CHANGED = "webhook_subscriber_changed"
    WEBHOOK_SUBSCRIBER_DELETED = "webhook_subscriber_deleted"
    # Failed deliveries taken back to pending by an admin (api.webhooks.send_again).
    WEBHOOK_DELIVERIES_SENT_AGAIN = "webhook_deliveries_sent_again"
    # Which key vouches for the chains: the heads sealed again with the key that signs now.
    AUDIT_HEADS_RESEALED = "audit_heads_resealed"
    # Which field key the stored sensitive values need: sealed again with the one that seals.
    FIELDS_RESEALED = "fields_resealed"


def access_hash(record: AccessRecord) -> str:
    """The record's hash over its content and its predecessor's: the runs' record hash, the
    subject standing in the place of the step."""
    return record_hash(
        run_id=None, seq=record.seq, action=record.action, step_name=record.subject,
        actor_kind=record.actor_kind, actor_label=record.actor_label,
        actor_user_id=record.actor_user_id, reason=record.reason, before=record.before,
        after=record.after, data={}, created_at=record.created_at, prev_hash=record.prev_hash)


def record_access_change(*, action: str, subject: str, actor: Actor, before: dict,
                         after: dict, reason: str = "") -> AccessRecord:
    """Append one record to the access chain, in the caller's transaction when there is one
    (so the record commits or rolls back with the change it describes). The reason is
    masked as a run action's is (redact_text): a credential pasted into it stays out of the
    record, whichever path (admin, API tokens, key rotation) wrote it."""
    reason = redact_text(reason)
    with transaction.atomic():
        head, _ = AccessChainHead.objects.select_for_update().get_or_create(pk=1)
        # The database's clock, as the runs' records have it: a web server whose clock is
        # off would otherwise date a grant wrongly, and for good, in a hashed record.
        now = AccessChainHead.objects.filter(pk=head.pk).values_list(Now(), flat=True).get()
        record = AccessRecord(
            seq=head.seq + 1, action=str(action), subject=subject, actor_kind=actor.kind,
            actor_label=actor.label, actor_user_id=actor.user_id, reason=reason,
            before=before, after=after, created_at=now, prev_hash=head.hash or GENESIS)
        # The JSON round trip the database makes, before hashing (sorted lists stay lists).
        record.before, record.after = as_stored(record.before), as_stored(record.after)
        record.hash = access_hash(record)
        record.save()
        head.seq, head.hash = record.seq, record.hash
        head.seal = seal_head(ACCESS_CHAIN, head.seq, head.hash)
        head.save(update_fields=["seq", "hash", "seal"])
    return record


def access_chain_break(records: Iterable[AccessRecord]) -> tuple[AccessRecord, str] | None:
    """The first record of the chain (in seq order) that does not verify and why, or None."""
    prev_hash, expected_seq = GENESIS, 1
    for record in records:
        problem = link_problem(record, expected_seq=expected_seq, prev_hash=prev_hash,
                               content_hash=access_hash(record))
        if problem is not None:
            return record, problem
        prev_hash, expected_seq = record.hash, expected_seq + 1
    return None


def verify_access_chain(records: Iterable[AccessRecord]) -> AccessRecord | None:
    """The first record of the chain (in seq order) that does not verify, or None."""
    broken = access_chain_break(records)
    return broken[0] if broken is not None else None


def reseal_access_head() -> bool:
    """Seal the access chain's head again with the key that signs now, if it has records and
    another key sealed it (audit.head_seals: a key being retired). Under the head's lock, as
    an append takes it. Returns whether it was sealed again."""
    with transaction.atomic():
        head = AccessChainHead.objects.select_for_update().filter(pk=1).first()
        if head is None or not head.seq or sealed_with(head.seal, signing_key_id()):
            return False
        head.seal = seal_head(ACCESS_CHAIN, head.seq, head.hash)
        head.save(update_fields=["seal"])
    return True


def access_head() -> tuple[int, str, str]:
    """(seq, hash, seal) of the access chain's last record as its head row keeps it: records
    removed from the chain's end leave the rest a chain that verifies, and only this tells;
    a chain rewritten with its head is told by the seal (audit.head_seals)."""
    head = AccessChainHead.objects.filter(pk=1).values_list("seq", "hash", "seal").first()
    return head if head is not None else (0, "", "")


def access_records(*, actor: str = "", action: str = "", since=None, until=None,
                   by: str = ""):
    """The access chain's records matching the filters, newest first. `by`: an actor kind
    (a person's changes, or the system's: a migration, a command)."""
    records = AccessRecord.objects.all()
    if by:
        records = records.filter(actor_kind=by)
    if actor:
        records = records.filter(actor_label=actor)
    if action:
        records = records.filter(action=action)
    if since:
        records = records.filter(created_at__gte=since)
    if until:
        records = records.filter(created_at__lt=until)
    return records.order_by("-seq")
