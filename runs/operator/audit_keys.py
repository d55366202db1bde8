"""Retiring a key of AUDIT_SEAL_KEYS (rotated on schedule, or leaked): every run's chain head
sealed with another key than the one that signs now is sealed again with it, so that the old
key can leave the ring and every head still verifies. Done by `manage.py reseal_audit_heads`,
only after `verify_audit` passed: sealing a head again vouches for its chain, and a chain
that does not verify must stay unvouched."""

from django.db import transaction

from audit.head_seals import seal_head, sealed_with, signing_key_id

from ..models import Run

BATCH = 1000


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
