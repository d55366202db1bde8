"""Retiring a key of AUDIT_SEAL_KEYS (rotated on schedule, or leaked): every chain head sealed
with another key than the one that signs now is sealed again with it, so that the old key can
leave the ring and every head still verifies. Only after `verify_audit` passed: sealing a
head again vouches for its chain, and a chain that does not verify must stay unvouched.
`manage.py reseal_audit_heads` calls reseal_heads."""

import io
from dataclasses import dataclass

from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import transaction

from audit.access import AccessAction, record_access_change, reseal_access_head
from audit.chain import Actor
from audit.head_seals import seal_head, sealed_with, signing_key_id

from ..machine.storable import person_text_problem
from ..models import Run

BATCH = 1000


class ResealRefused(Exception):
    """Nothing was sealed again: a chain does not verify."""


class ReasonRefused(ResealRefused):
    """Nothing was sealed again: the reason is empty or cannot be kept (the message says
    which, to follow the reason's name)."""


@dataclass(frozen=True)
class Resealed:
    key_id: str
    run_heads: int  # sealed again
    already: int  # sealed with the signing key already
    access_head: bool


def reseal_heads(*, reason: str, actor: Actor) -> Resealed:
    """Verify every chain, then seal again with the signing key every head another key
    sealed, and keep `reason` in the access chain (audit_heads_resealed). ResealRefused,
    with nothing sealed, for a reason that cannot be kept or a chain that does not verify."""
    reason = reason.strip()
    if not reason:
        raise ReasonRefused(" is empty: say why the heads are sealed again")
    if (problem := person_text_problem(reason)) is not None:
        raise ReasonRefused(f": {problem}; nothing was sealed")
    try:
        call_command("verify_audit", stdout=io.StringIO())
    except CommandError as exc:
        raise ResealRefused(str(exc)) from None
    key_id = signing_key_id()
    resealed, already = reseal_run_heads()
    access = reseal_access_head()
    record_access_change(
        action=AccessAction.AUDIT_HEADS_RESEALED, subject=f"AUDIT_SEAL_KEYS {key_id}",
        actor=actor, reason=reason, before={},
        after={"key_id": key_id, "run_heads": resealed, "access_head": access})
    return Resealed(key_id, resealed, already, access)


def reseal_run_heads(*, batch: int = BATCH) -> tuple[int, int]:
    """Seal again, with the signing key, every run's head that another key sealed. Returns
    (heads sealed again, heads sealed with the signing key already).

    A head is sealed again only as it was read (its seq, hash and seal unchanged): a run that
    moved on meanwhile had its new head sealed by its transition, with the signing key."""
    key_id = signing_key_id()
    resealed = already = 0
    after = 0
    while True:
        heads = list(Run.objects.filter(pk__gt=after, audit_seq__gt=0).order_by("pk")
                     .values_list("pk", "audit_seq", "audit_head", "audit_seal")[:batch])
        if not heads:
            return resealed, already
        with transaction.atomic():
            for run_id, seq, head, seal in heads:
                if sealed_with(seal, key_id):
                    already += 1
                    continue
                resealed += Run.objects.filter(
                    pk=run_id, audit_seq=seq, audit_head=head, audit_seal=seal,
                ).update(audit_seal=seal_head(run_id, seq, head))
        after = heads[-1][0]
