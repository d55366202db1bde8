"""A step (or tool call) settled as not done by a person keeps their evidence on its row
(error_message, shown by the run page and show_run): masked there as in the audit record.
A status message (a reopen's reason, given by automation too) is masked as well."""

import pytest

from approvals.operator_actions import act
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.machine import transitions
from runs.models import Run, RunStatus, StepStatus
from runs.operator.actions import ActionInput
from tests.factories import SYSTEM, new_run, place, step

pytestmark = pytest.mark.django_db

EVIDENCE = "tracker login password=hunter2secret, header Bearer eyJabc.def.ghi: no task"


@pytest.fixture
def olga(db):
    from django.contrib.auth.models import Group, Permission, User

    ensure_roles(Group, Permission)
    user = User.objects.create_user("olga", password="pw")
    user.groups.add(Group.objects.get(name="operators"))
    return user


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
