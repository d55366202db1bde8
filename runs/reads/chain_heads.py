"""The head of each run's audit chain as the run row keeps it, for verify_audit (registered
with audit.chain at start): records removed from a chain's end are told only by it, and a
chain rewritten with its head only by the head's seal."""

from collections.abc import Iterator

from ..models import Run


def chain_heads() -> Iterator[tuple[int, int, str, str]]:
    """(run id, seq, hash, seal) of every run, in run id order, streamed. Runs whose head is
    empty (seq 0) are yielded too: every run is started with its first record, so a run with
    none had its chain emptied and its head cleared, and verify_audit must see it to name it.
    Streamed in pages by primary key either way: no index on seq narrows the read."""
    return (Run.objects.order_by("pk")
            .values_list("pk", "audit_seq", "audit_head", "audit_seal")
            .iterator(chunk_size=2000))
