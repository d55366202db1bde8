"""manage.py run_action: the same table, permission rule and transitions as the console."""

import io

import pytest
from django.core.management import CommandError, call_command

from audit.models import AuditRecord
from runs.models import Run, RunStatus, StepStatus
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


def _run_action(*args) -> str:
    out = io.StringIO()
    call_command("run_action", *map(str, args), stdout=out)
    return out.getvalue()


@pytest.fixture
def effected_run():
    return place(new_run(), status=RunStatus.ATTENTION,
                 step_statuses={"create-task": StepStatus.SUCCEEDED,
                                "post-ledger": StepStatus.SUCCEEDED})


def test_terminate_from_the_cli_after_a_high_impact_effect_opens_a_request(
        operator, effected_run):
    from approvals.models import ApprovalRequest

    out = _run_action(effected_run.pk, "terminate", "--user", "olga", "--reason", "fraud")
    request = ApprovalRequest.objects.get(run=effected_run, action="terminate")
    assert f"approval request {request.pk} created" in out and "--decide" in out
    assert Run.objects.get(pk=effected_run.pk).status == RunStatus.ATTENTION
    assert not AuditRecord.objects.filter(run=effected_run, action="terminated").exists()
    with pytest.raises(CommandError, match="unrecognized arguments: '--approved-by' 'carl'"):
        _run_action(effected_run.pk, "terminate", "--user", "olga", "--reason", "fraud",
                    "--approved-by", "carl")


def test_the_cli_refuses_an_empty_reason_and_a_user_without_the_permission(
        operator, auditor, stuck_run):
    with pytest.raises(CommandError, match="needs a reason"):
        _run_action(stuck_run.pk, "resume", "--user", "olga", "--reason", " ")
    with pytest.raises(CommandError, match="aude may not resume"):
        _run_action(stuck_run.pk, "resume", "--user", "aude", "--reason", "fixed")
    assert Run.objects.get(pk=stuck_run.pk).status == RunStatus.ATTENTION


def test_the_cli_lists_what_the_run_offers_with_the_reasons_for_the_rest(operator, stuck_run):
    out = _run_action(stuck_run.pk, "--user", "olga")
    lines = dict(line.split(None, 1) for line in out.strip().splitlines())
    assert lines["retry_step"] == "offered" and lines["resume"] == "offered"
    assert lines["reopen"].startswith("-: Reopen is not possible")
    assert lines["confirm_compensation"].startswith("-: ")
