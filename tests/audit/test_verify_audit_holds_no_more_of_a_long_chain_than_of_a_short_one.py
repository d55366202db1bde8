"""verify_audit checks each run's chain as its records stream past: a run whose chain holds
100,000 records (a run of thousands of steps, an agent's thousands of calls) must not be held
whole in the command's memory. Measured by the peak memory the command allocates (tracemalloc)
for a chain four times as long: about the same. Not by time."""

import tracemalloc

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from audit.chain import Actor, build_record
from audit.head_seals import seal_head
from audit.models import AuditRecord
from runs.execution import executor
from runs.models import Run, RunStatus
from tests.factories import new_run

pytestmark = pytest.mark.django_db


def _lengthen(run: Run, records: int) -> Run:
    """`records` more records on the run's chain, each linked to the one before, and the
    run's head and its seal moved to the last: what a long run leaves."""
    head_seq, head_hash = run.audit_seq, run.audit_head
    added = []
    for _ in range(records):
        record = build_record(run_id=run.pk, head_seq=head_seq, head_hash=head_hash,
                              action="step_succeeded", actor=Actor.system("w1"),
                              step_name="s", data={"attempt": 1})
        head_seq, head_hash = record.seq, record.hash
        added.append(record)
    AuditRecord.objects.bulk_create(added, batch_size=2000)
    Run.objects.filter(pk=run.pk).update(audit_seq=head_seq, audit_head=head_hash,
                                         audit_seal=seal_head(run.pk, head_seq, head_hash))
    return Run.objects.get(pk=run.pk)


def _peak_of_verify(capsys) -> int:
    tracemalloc.start()
    try:
        call_command("verify_audit")
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        assert "all chains intact" in capsys.readouterr().out


def test_a_chain_four_times_as_long_is_verified_in_the_same_memory(capsys):
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    run = _lengthen(Run.objects.get(pk=run.pk), 3000)
    short = _peak_of_verify(capsys)
    run = _lengthen(run, 9000)
    long = _peak_of_verify(capsys)
    # Held whole, the chain of 12,000 records took 3.6 times the peak of the one of 3,000
    # (19.6 MB against 5.4 MB); streamed, 1.3 times (the batches the stream reads).
    assert long < 2 * short, (short, long)


def test_a_break_deep_in_a_long_chain_is_still_named(capsys):
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    run = _lengthen(Run.objects.get(pk=run.pk), 2500)
    # A record whose link is wrong, past the first batch of the stream.
    bad = build_record(run_id=run.pk, head_seq=run.audit_seq, head_hash="f" * 64,
                       action="step_succeeded", actor=Actor.system("w1"), step_name="s")
    bad.save()
    with pytest.raises(CommandError) as failed:
        call_command("verify_audit")
    assert (f"audit chain of run {run.pk} is broken at record id={bad.pk} "
            f"seq={bad.seq} action=step_succeeded") in str(failed.value)
