"""Every path that writes a run's chain head writes its keyed seal with it (audit.head_seals):
the start statement, the lease holder's one-statement checkpoint, the locking path of a
person's transition. Marked `store`: it passes on SQLite too (STORE_TESTS_ON_SQLITE=1,
-m store), whose store writes the run row through the ORM."""

import pytest
from django.core.management import call_command

from audit.chain import Actor
from audit.head_seals import head_seal_problem
from audit.models import AuditRecord
from runs.execution import executor
from runs.machine import transitions
from runs.models import Run, RunStatus
from tests.factories import new_run

pytestmark = [pytest.mark.django_db, pytest.mark.store]


def assert_head_sealed(run_id: int) -> Run:
    run = Run.objects.get(pk=run_id)
    last = AuditRecord.objects.filter(run_id=run_id).order_by("-seq").first()
    assert (run.audit_seq, run.audit_head) == (last.seq, last.hash)
    assert head_seal_problem(run.pk, run.audit_seq, run.audit_head, run.audit_seal) is None
    return run


def test_a_started_run_keeps_its_first_head_sealed():
    run = new_run(wake=False)
    assert assert_head_sealed(run.pk).audit_seq == 1


def test_a_run_taken_through_its_steps_ends_with_a_sealed_head():
    run = new_run(wake=False)
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    done = assert_head_sealed(run.pk)
    assert done.audit_seq > 5  # each step's checkpoint moved the head on, and sealed it


def test_a_persons_transition_seals_the_head_it_writes():
    run = new_run(wake=False)
    transitions.cancel(run.pk, actor=Actor.system("ops"), reason="no longer needed")
    assert assert_head_sealed(run.pk).audit_seq >= 2


def test_verify_audit_passes_on_runs_as_the_runtime_left_them(capsys):
    for _ in range(3):
        run = new_run(wake=False)
        executor.advance_run(run.pk, worker="w1")
    call_command("verify_audit")
    assert "all chains intact, every head sealed" in capsys.readouterr().out
