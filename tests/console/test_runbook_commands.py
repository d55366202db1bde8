"""The runbook's commands, as an operator half awake types them: a slip (no --step on a step
action, a misspelt workflow) ends in one line naming what is wrong and how to say it, with
nothing done, and an answer is told once."""

import io

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import CommandError, call_command

from approvals.models import ApprovalRequest
from audit.models import AuditRecord
from runs.models import Run, RunStatus, StepStatus
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


def _call(command: str, *args) -> str:
    out = io.StringIO()
    call_command(command, *map(str, args), stdout=out)
    return out.getvalue()


def test_a_step_action_without_step_names_the_option_and_the_steps_the_run_allows(
        operator, stuck_run, monkeypatch):
    records = AuditRecord.objects.filter(run=stuck_run).count()
    # Refused before the password is asked: a wrong command costs none.
    monkeypatch.delenv("CLI_PASSWORD")
    with pytest.raises(CommandError) as refused:
        _call("run_action", stuck_run.pk, "retry_step", "--user", "olga", "--reason", "fixed")
    assert str(refused.value) == ("Retry step is aimed at one step: "
                                  f"choose it (run {stuck_run.pk} allows create-task); nothing "
                                  "was done. Give it with --step.")
    assert Run.objects.get(pk=stuck_run.pk).status == RunStatus.ATTENTION
    assert AuditRecord.objects.filter(run=stuck_run).count() == records


def test_a_step_action_no_step_of_the_run_allows_says_so_without_step(operator):
    run = place(new_run(), status=RunStatus.ATTENTION)
    with pytest.raises(CommandError, match=f"^Retry step was not done: no step of run {run.pk} "
                                           "can be its target$"):
        _call("run_action", run.pk, "retry_step", "--user", "olga", "--reason", "fixed")


def test_a_step_action_without_step_by_someone_who_may_not_take_it_names_the_permission(
        auditor, stuck_run):
    with pytest.raises(CommandError, match="^aude may not retry step run .* \\(needs "
                                           "runs.retry_step\\)"):
        _call("run_action", stuck_run.pk, "retry_step", "--user", "aude", "--reason", "x")


def test_a_decision_not_recorded_is_told_once_as_the_error(operator):
    deputy = User.objects.create_user("dora", password="pw")
    deputy.groups.add(Group.objects.get(name="operators"))
    run = place(new_run(), status=RunStatus.ATTENTION,
                step_statuses={"create-task": StepStatus.SUCCEEDED,
                               "post-ledger": StepStatus.SUCCEEDED})
    _call("run_action", run.pk, "terminate", "--user", "olga", "--reason", "fraud")
    request = ApprovalRequest.objects.get(run=run, action="terminate")
    assert "recorded" in _call("run_action", "--decide", request.pk, "--user", "dora")
    out = io.StringIO()
    with pytest.raises(CommandError, match="Already approved by dora"):
        call_command("run_action", "--decide", str(request.pk), "--user", "dora", stdout=out)
    assert out.getvalue() == ""


def test_list_runs_refuses_a_workflow_no_workflow_is_named_like():
    new_run()
    with pytest.raises(CommandError) as refused:
        _call("list_runs", "--workflow", "test-ordres")
    assert str(refused.value).startswith("--workflow: no workflow's name contains "
                                         "'test-ordres' (close names: test-orders")
    # A part of a name still finds its workflow's runs.
    assert "test-orders" in _call("list_runs", "--workflow", "orders")


def test_a_bulk_preview_refuses_a_workflow_no_workflow_is_named_like(operator):
    new_run()
    with pytest.raises(CommandError, match="^--workflow: no workflow's name contains "
                                           "'test-ordres'"):
        _call("bulk_action", "preview", "resume", "--user", "olga", "--workflow", "test-ordres")
    assert "matching: 1" in _call("bulk_action", "preview", "resume", "--user", "olga",
                                  "--workflow", "test-orders")


def test_settling_an_outcome_without_evidence_names_the_option(operator):
    run = place(new_run(), status=RunStatus.ATTENTION,
                step_statuses={"fetch": StepStatus.SUCCEEDED, "classify": StepStatus.SUCCEEDED,
                               "create-task": StepStatus.UNKNOWN})
    records = AuditRecord.objects.filter(run=run).count()
    with pytest.raises(CommandError, match=r"needs the evidence for it\. Give it with "
                                           r"--evidence\.$"):
        _call("run_action", run.pk, "reconcile", "--step", "create-task", "--mode",
              "not_found", "--user", "olga", "--reason", "checked the tracker")
    assert AuditRecord.objects.filter(run=run).count() == records


def test_settling_an_outcome_as_found_without_its_remote_reference_names_the_option(operator):
    run = place(new_run(), status=RunStatus.ATTENTION,
                step_statuses={"fetch": StepStatus.SUCCEEDED, "classify": StepStatus.SUCCEEDED,
                               "create-task": StepStatus.UNKNOWN})
    records = AuditRecord.objects.filter(run=run).count()
    with pytest.raises(CommandError) as refused:
        _call("run_action", run.pk, "reconcile", "--step", "create-task", "--mode", "found",
              "--evidence", "in the tracker", "--user", "olga", "--reason", "checked")
    assert str(refused.value) == ("Reconcile was not done: Give the remote reference of the "
                                  "effect you found. Give it with --remote-ref.")
    assert AuditRecord.objects.filter(run=run).count() == records
