"""Runs for the tests of what becomes of a run archived: one completed and archived since a
page showed it (completed_and_archived), and an agent run holding every part of one that an
archive file keeps (agent_run_with_a_tool_call)."""

from dataclasses import dataclass
from datetime import timedelta

from django.utils import timezone

from archive.archiving import archive_runs
from runs.execution import executor
from runs.models import AgentTurn, Run, RunStatus, Step, ToolCall
from tests.factories import new_run, place


@dataclass(frozen=True)
class Archived:
    """A run archived: its id, and the audit sequence its page (or its row in the runs list)
    was drawn at before archival moved it out of the hot tables."""

    run_id: int
    seen: int


def completed_and_archived(settings, tmp_path) -> Archived:
    """A test-orders run advanced to completion in this process, then made to look finished
    40 days ago and archived (retention 30 days) to an archive file under `tmp_path`.
    Needs the test workflows' script (the `script` fixture)."""
    settings.VAR_DIR = tmp_path
    settings.RUNS_RETENTION_DAYS = 30
    settings.STORAGES = {k: v for k, v in settings.STORAGES.items() if k != "archive"}
    run = new_run("test-orders")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    seen = Run.objects.get(pk=run.pk).audit_seq
    then = timezone.now() - timedelta(days=40)
    Run.objects.filter(pk=run.pk).update(updated_at=then, finished_at=then)
    archive_runs(actor="test")
    assert not Run.objects.filter(pk=run.pk).exists()
    return Archived(run.pk, seen)


def agent_run_with_a_tool_call(*, said: str, arguments: dict) -> Run:
    """A completed test-agent run whose assist step took one turn (`said`) and made one tool
    call (write-note with `arguments`, succeeded, remote reference NOTE-1)."""
    run = place(new_run("test-agent"), status=RunStatus.COMPLETED,
                step_statuses={"assist": "succeeded"})
    step = Step.objects.get(run=run, name="assist")
    now = timezone.now()
    AgentTurn.objects.create(step=step, index=0, content=said, created_at=now)
    ToolCall.objects.create(step=step, turn=0, index=0, call_id="c1", tool="write-note",
                            arguments=arguments, args_hash="h" * 64, status="succeeded",
                            idempotency_key="k" * 64, remote_ref="NOTE-1", updated_at=now)
    return run
