"""verify_audit reads each run's head and its chain in one snapshot: a run that records a
step (in another session) between the two reads is not reported as cut short."""

import threading

import pytest
from django.core.management import call_command
from django.db import connection

from audit import chain
from audit.chain import Actor
from runs import store
from runs.execution import executor
from runs.machine import transitions
from runs.models import Run
from runs.reads.chain_heads import chain_heads

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_run_that_moves_on_between_the_reads_is_not_reported_broken(script, capsys):
    run, _ = transitions.start_run(workflow="test-orders", business_key="live-1",
                                   input={"order": "o-1"}, actor=Actor.system("test"),
                                   wake=False)

    def heads_then_a_worker_moves_on():
        first = chain_heads()
        head = next(first)  # the snapshot is taken here, at the command's first read

        def worker():
            try:
                executor.advance_run(run.pk, worker="w1")
            finally:
                connection.close()

        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
        yield head
        yield from first

    snapshot = lambda: store.current().snapshot()  # noqa: E731 - as runs registers it
    chain.register_chain_heads(heads_then_a_worker_moves_on, snapshot)
    try:
        call_command("verify_audit")
    finally:
        chain.register_chain_heads(chain_heads, snapshot)
    assert "all chains intact" in capsys.readouterr().out
    assert Run.objects.get(pk=run.pk).audit_seq > 1  # the worker did move it on meanwhile
