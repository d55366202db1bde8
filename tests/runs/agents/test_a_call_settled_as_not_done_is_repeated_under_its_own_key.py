"""A person may settle an unknown high-impact tool call as "not done" before a slow request
of it has landed. The model, told the call did not happen, asks for it again: that repeat,
with the same tool and arguments, is sent under the settled call's key, so a receiver that
honours keys does it once. The invoice-triage agent posts to the sandbox's ledger over real
HTTP; the ledger keeps one entry per key."""

import pytest

from audit.models import AuditRecord
from demo.sandbox import faults
from demo.sandbox.models import LedgerEntry
from runs.definitions import definition
from runs.machine import transitions
from runs.models import AttentionReason, RunStatus, ToolCall
from tests.agent_runs import ACTOR, advance, start_triage

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def sandbox(live_sandbox):
    return live_sandbox


def posted_unknown():
    """The ledger committed the posting, then timed out; no lookup by key answers."""
    faults.add("ledger.post", faults.COMMIT_THEN_TIMEOUT, times=1)
    faults.add("ledger.lookup", faults.UNAVAILABLE, times=faults.MOST_TIMES)
    run = advance(start_triage())
    assert run.attention_reason == AttentionReason.UNKNOWN_OUTCOME, run.status_message
    (post,) = ToolCall.objects.filter(step__run=run, tool="post-ledger")
    assert post.status == "unknown" and LedgerEntry.objects.count() == 1
    return run, post


def test_the_models_repeat_of_a_call_settled_as_not_done_posts_nothing_twice():
    run, post = posted_unknown()
    transitions.reconcile_tool_call(
        run.pk, step_name="triage", call_ref=post.ref, verdict=definition.NotFound(),
        actor=ACTOR, reason="the ledger's search showed nothing yet",
        evidence="searched the ledger for the invoice at 10:02: no entry")
    post.refresh_from_db()
    assert post.status == "failed" and post.key_open_for_repeat
    run = advance(run)
    assert run.status == RunStatus.COMPLETED, run.status_message
    first, repeat = ToolCall.objects.filter(step__run=run, tool="post-ledger").order_by("turn")
    # The repeat is the same action: same arguments, same key, and the ledger's one entry.
    assert repeat.args_hash == first.args_hash and repeat.turn > first.turn
    assert repeat.idempotency_key == first.idempotency_key
    assert repeat.compensation_key == first.compensation_key != ""
    entry = LedgerEntry.objects.get()
    assert repeat.status == "succeeded" and repeat.remote_ref == entry.ref
    assert entry.transaction_ref == first.idempotency_key
    # The key is taken once: the settled call no longer offers it.
    first.refresh_from_db()
    assert first.status == "failed" and not first.key_open_for_repeat
    stored = AuditRecord.objects.get(run=run, action="agent_turn_stored",
                                     data__turn=repeat.turn)
    assert stored.data["same_key_as"] == {repeat.ref: first.ref}


def test_a_call_found_by_a_person_leaves_no_key_open():
    run, post = posted_unknown()
    entry = LedgerEntry.objects.get()
    transitions.reconcile_tool_call(
        run.pk, step_name="triage", call_ref=post.ref,
        verdict=definition.Found(ref=entry.ref), actor=ACTOR,
        reason="the entry is in the ledger", evidence=f"ledger entry {entry.ref}")
    run = advance(run)
    assert run.status == RunStatus.COMPLETED, run.status_message
    (post,) = ToolCall.objects.filter(step__run=run, tool="post-ledger")
    assert post.status == "succeeded" and not post.key_open_for_repeat
    assert LedgerEntry.objects.count() == 1
    assert not AuditRecord.objects.filter(run=run, data__has_key="same_key_as").exists()
