"""Once a lookup by key a person runs settles an unknown step as not done, the run's reason
says what is true then: settled_not_done ("effect settled as not done"), on the description
the console, the API and show_run give, with its own runbook, the next step still Retry
step. A lookup that could not tell settles nothing and leaves the reason unknown_outcome.
Runs settled so before this reason existed get it from the migration, and no other run."""

import io
from importlib import import_module
from types import SimpleNamespace

import pytest
from django.apps import apps as django_apps
from django.core.management import call_command
from django.db import connection

from api.selectors import run_view
from audit.chain import Actor
from runs.machine.errors import TransientError, UnknownOutcome
from runs.models import AttentionReason, Run, RunStatus, Step, StepStatus
from runs.operator.guidance import recommend
from runs.operator.reconciliation import reconcile_step
from tests.agent_runs import advance
from tests.factories import new_run, place, step

pytestmark = pytest.mark.django_db
PERSON = Actor.system("test")
UNSETTLED = AttentionReason.UNKNOWN_OUTCOME.label


def _task_unknown(script) -> Run:
    """create-task timed out after sending and every automatic lookup failed."""
    script.plan["create-task"] = [UnknownOutcome("timeout after send")]
    script.lookup_errors.extend([TransientError("tracker lookup down")] * 3)
    run = advance(new_run(wake=False))
    assert run.attention_reason == AttentionReason.UNKNOWN_OUTCOME
    return run


def _look_up(run: Run) -> Run:
    reconcile_step(run.pk, step_name="create-task", actor=PERSON, reason="tracker back")
    return Run.objects.get(pk=run.pk)


def _show_run(run: Run) -> str:
    out = io.StringIO()
    call_command("show_run", str(run.pk), stdout=out)
    return out.getvalue()


def test_a_step_a_lookup_settled_as_not_done_no_longer_reads_unsettled(script):
    run = _task_unknown(script)
    # The tracker cannot tell yet: nothing is settled, and the reason says so still.
    script.lookup_errors.append(TransientError("tracker lookup down"))
    run = _look_up(run)
    assert run.attention_reason == AttentionReason.UNKNOWN_OUTCOME
    assert step(run, "create-task").status == StepStatus.UNKNOWN

    run = _look_up(run)  # the tracker answers: nothing under the key

    assert (run.status, run.attention_reason) == (RunStatus.ATTENTION,
                                                  AttentionReason.SETTLED_NOT_DONE)
    assert step(run, "create-task").status == StepStatus.FAILED
    assert run.status_message == ("create-task settled as not done; retry the step to send "
                                  "it again with the same key")
    description = run_view(run).description
    assert description.startswith("needs attention: effect settled as not done at ")
    shown = _show_run(run)
    assert UNSETTLED not in shown and UNSETTLED not in description
    assert "  runbook: docs/operations.md#runbook-settled_not_done" in shown
    steps = list(Step.objects.filter(run=run).order_by("position"))
    advice = recommend(run, steps)
    assert (advice.action_name, advice.step) == ("retry_step", "create-task")
    assert not script.effects  # nothing was sent again


def test_the_migration_gives_runs_settled_so_before_it_the_reason_and_no_other_run(script):
    migration = import_module("runs.migrations.0059_attention_settled_not_done")
    settled_message = "settled as not done: lookup by key: NotFound()"

    def held(reason: str, **steps: tuple[str, str]) -> Run:
        run = place(new_run(wake=False), status=RunStatus.ATTENTION, attention_reason=reason)
        for name, (status, message) in steps.items():
            Step.objects.filter(run=run, name=name).update(status=status,
                                                           error_message=message)
        return run

    settled = held(AttentionReason.UNKNOWN_OUTCOME,
                   **{"create-task": (StepStatus.FAILED, settled_message)})
    still_unknown = held(AttentionReason.UNKNOWN_OUTCOME,
                         **{"create-task": (StepStatus.FAILED, settled_message),
                            "post-ledger": (StepStatus.UNKNOWN, "timed out")})
    failed_by_itself = held(AttentionReason.UNKNOWN_OUTCOME,
                            **{"create-task": (StepStatus.FAILED, "HTTP 400")})
    other_reason = held(AttentionReason.PERMANENT_ERROR,
                        **{"create-task": (StepStatus.FAILED, settled_message)})

    def reasons() -> list[str]:
        return [Run.objects.get(pk=run.pk).attention_reason
                for run in (settled, still_unknown, failed_by_itself, other_reason)]

    editor = SimpleNamespace(connection=connection)
    migration.relabel(django_apps, editor)
    assert reasons() == [AttentionReason.SETTLED_NOT_DONE, AttentionReason.UNKNOWN_OUTCOME,
                         AttentionReason.UNKNOWN_OUTCOME, AttentionReason.PERMANENT_ERROR]
    migration.unlabel(django_apps, editor)
    assert reasons() == [AttentionReason.UNKNOWN_OUTCOME, AttentionReason.UNKNOWN_OUTCOME,
                         AttentionReason.UNKNOWN_OUTCOME, AttentionReason.PERMANENT_ERROR]
