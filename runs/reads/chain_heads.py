"""The head of each run's audit chain as the run row keeps it, for verify_audit (registered
with audit.chain at start): records removed from a chain's end are told only by it, and a
chain rewritten with its head only by the head's seal."""

from collections.abc import Iterator

from ..models import Run


def chain_heads() -> Iterator[tuple[int, int, str, str]]:
    """(run id, seq, hash, seal) of every run with a chain, in run id order, streamed."""
    return (Run.objects.filter(audit_seq__gt=0).order_by("pk")
            .values_list("pk", "audit_seq", "audit_head", "audit_seal")
            .iterator(chunk_size=2000))
