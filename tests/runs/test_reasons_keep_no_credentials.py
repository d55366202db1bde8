"""A person's words (an operator's reason, a bulk job's reason; an approver's comment:
tests/approvals/test_comments_keep_no_credentials.py) are
stored in the audit chain, on the run and on requests that others read: a credential pasted
into them is masked before anything keeps it, by every caller."""

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
from tests.factories import SYSTEM, new_run, place

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
    job = start_bulk_job("terminate", RunFilters(status=RunStatus.ATTENTION), user=olga,
                         reason=f"token={SECRET}")
    assert job.reason == "token=[redacted]"

