"""A drill run breaks on purpose in the drill's own process (an injected failure, a worker
that kills itself): a fleet worker woken for it (by a decision the drill records, or by the
sweeper) would do the real thing instead. So a drill run is advanced by the drill alone, and
the drill advances drill runs only; the sweeper sends no wake-up for drill runs."""

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from audit.actions import AuditAction
from audit.models import AuditRecord
from runs.execution import executor, sweeper
from runs.models import Run, RunStatus
from tests.factories import new_run
from tests.processes import start_worker, stop

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_worker_of_the_fleet_leaves_a_drill_run_alone(script):
    script.reset()
    run = new_run(wake=False, drill=True)
    assert executor.advance_run(run.pk, worker="fleet-1") is None
    assert Run.objects.get(pk=run.pk).status == RunStatus.QUEUED
    assert not AuditRecord.objects.filter(run=run, action=AuditAction.CLAIMED).exists()
    assert script.calls == []
    # The drill advances it.
    assert executor.advance_run(run.pk, worker="drill", drill=True) == RunStatus.COMPLETED


def test_the_drill_leaves_real_work_alone(script):
    script.reset()
    run = new_run(wake=False)
    assert executor.advance_run(run.pk, worker="drill", drill=True) is None
    assert Run.objects.get(pk=run.pk).status == RunStatus.QUEUED and script.calls == []


def test_the_sweeper_wakes_no_drill_run():
    drill = new_run(wake=False, drill=True)
    real = new_run(wake=False)
    long_ago = timezone.now() - timedelta(days=1)
    Run.objects.filter(pk__in=[drill.pk, real.pk]).update(updated_at=long_ago)
    assert sweeper.sweep().requeued == 1  # the real run's only


def test_advance_run_says_which_kind_of_run_it_left_alone(script):
    script.reset()
    drill = new_run(wake=False, drill=True)
    real = new_run(wake=False)
    with pytest.raises(CommandError, match="is a drill run: only the drill advances it"):
        call_command("advance_run", str(drill.pk))
    with pytest.raises(CommandError, match="is no drill run"):
        call_command("advance_run", str(real.pk), "--drill")
    assert script.calls == []


@pytest.fixture
def drill_workflows(settings, live_sandbox, empty_broker):
    settings.RUNS_WORKFLOW_MODULES = [*settings.RUNS_WORKFLOW_MODULES, "tests.workflows"]


@pytest.mark.usefixtures("drill_workflows")
def test_the_drills_pass_with_a_worker_of_the_fleet_listening(tmp_path, capsys):
    # Drill 6 approves its run's wait: the decision wakes the fleet, whose worker ran the
    # step the drill fails on purpose, for real, and drill 6 failed.
    fleet = start_worker("fleet", tmp_path)
    try:
        call_command("drill", "invoice-approval")
    finally:
        stop(fleet)
    out = capsys.readouterr().out
    assert "6 late failure" in out and "FAIL" not in out
    fleet_label = f":{fleet.pid}"
    claimed_by_fleet = AuditRecord.objects.filter(
        run__drill=True, action=AuditAction.CLAIMED, actor_label__endswith=fleet_label)
    assert not claimed_by_fleet.exists()
