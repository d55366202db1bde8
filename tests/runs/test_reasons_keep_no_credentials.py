"""A person's words (an operator's reason, a bulk job's reason; an approver's comment:
tests/approvals/test_comments_keep_no_credentials.py) are
stored in the audit chain, on the run and on requests that others read: a credential pasted
into them is masked before anything keeps it, by every caller. So is the evidence a step
settled as not done keeps on its row, and a status message that carries a reason."""

import pytest
from django.contrib.auth.models import Group, Permission, User

from approvals.bulk import start_bulk_job
from approvals.operator_actions import act
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.machine import transitions
from runs.models import Run, RunStatus, StepStatus
from runs.operator.actions import ActionInput
from runs.reads.selectors import RunFilters
from tests.factories import SYSTEM, new_run, place, step

SECRET = "sk-live0123456789abcdef"
pytestmark = pytest.mark.django_db


@pytest.fixture
def olga(db):
    ensure_roles(Group, Permission)
    user = User.objects.create_user("olga", password="pw")
    user.groups.add(Group.objects.get(name="operators"))
    return user


def _nowhere_in_the_database(run):
    records = AuditRecord.objects.filter(run=run)
    assert not any(SECRET in r.reason or SECRET in str(r.data) for r in records)
    assert SECRET not in Run.objects.get(pk=run.pk).status_message


def test_an_operators_reason_is_masked_everywhere_it_is_kept(olga):
    run = place(new_run(), status=RunStatus.ATTENTION,
                step_statuses={"create-task": StepStatus.FAILED})
    reason = f"vendor cancelled; their key was {SECRET} and password=hunter2, rotate both"
    act("terminate", run.pk, user=olga, given=ActionInput(reason=reason))
    record = AuditRecord.objects.get(run=run, action="terminated")
    assert "vendor cancelled" in record.reason and "rotate both" in record.reason
    assert "hunter2" not in record.reason and "[redacted]" in record.reason
    _nowhere_in_the_database(run)


def test_a_transition_called_by_automation_masks_its_reason_too():
    run = place(new_run(), status=RunStatus.ATTENTION)
    transitions.resume(run.pk, actor=SYSTEM, reason=f"Bearer {SECRET}")
    assert AuditRecord.objects.get(run=run, action="resumed").reason == "Bearer [redacted]"


def test_a_bulk_jobs_reason_is_masked_before_it_is_stored(olga):
    place(new_run(), status=RunStatus.ATTENTION, step_statuses={"create-task": StepStatus.FAILED})
    job, _ = start_bulk_job("terminate", RunFilters(status=RunStatus.ATTENTION), user=olga,
                            reason=f"token={SECRET}")
    assert job.reason == "token=[redacted]"


# A step (or tool call) settled as not done keeps the evidence on its row (error_message, shown
# by the run page and show_run); a status message may carry a reason given by automation.
EVIDENCE = "tracker login password=hunter2secret, header Bearer eyJabc.def.ghi: no task"


def test_evidence_of_not_done_is_masked_on_the_row_as_in_the_record(olga):
    run = place(new_run(), status=RunStatus.ATTENTION,
                step_statuses={"fetch": StepStatus.SUCCEEDED, "classify": StepStatus.SUCCEEDED,
                               "create-task": StepStatus.UNKNOWN})
    act("reconcile", run.pk, user=olga,
        given=ActionInput(reason="checked the tracker", step="create-task", mode="not_found",
                          evidence=EVIDENCE))
    task = step(Run.objects.get(pk=run.pk), "create-task")
    assert task.status == StepStatus.FAILED
    assert task.error_message.startswith("settled as not done: tracker login password=")
    assert "hunter2secret" not in task.error_message
    assert "eyJabc.def.ghi" not in task.error_message and "[redacted]" in task.error_message
    record = AuditRecord.objects.filter(run=run).order_by("pk").last()
    assert record.reason == "checked the tracker"
    assert "tracker login" in record.data["evidence"]
    assert "hunter2secret" not in str(record.data) and "eyJabc" not in str(record.data)


def test_a_reopen_by_automation_keeps_no_credential_in_the_status_message():
    run = place(new_run(), status=RunStatus.TERMINATED)
    transitions.reopen(run.pk, actor=SYSTEM, reason=f"ticket 9: {EVIDENCE}")
    message = Run.objects.get(pk=run.pk).status_message
    assert message.startswith("ticket 9: tracker login password=")
    assert "hunter2secret" not in message and "eyJabc" not in message
