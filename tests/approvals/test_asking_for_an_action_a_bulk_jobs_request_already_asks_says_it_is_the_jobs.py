"""A run has one open four-eyes request per action. When that request is a bulk job's
(the job's request hangs on its first run), an operator asking for the same action on that
run alone was told "approval request 1 already waits, asked by carl with the reason
\"incident 42\"", as if it were a request about this one run: they could take its approval,
or their own, for the ending of this run alone, where it ends every run of the job. They are
told it is the bulk job's, how many runs it acts on, and that nothing was done."""

import pytest
from django.contrib.auth.models import Group, Permission, User

from approvals.models import ApprovalRequest
from approvals.operator_actions import act
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.models import Run, RunStatus
from runs.operator.actions import ActionInput
from tests.approvals.bulk_requests import bulk_terminate, run_with_an_effect

pytestmark = pytest.mark.django_db


@pytest.fixture
def people(db):
    """carl asked for the bulk job; omar asks about one run."""
    ensure_roles(Group, Permission)
    carl, omar = User.objects.create_user("carl"), User.objects.create_user("omar")
    for user in (carl, omar):
        user.groups.add(Group.objects.get(name="operators"))
    return carl, omar


def test_the_person_is_told_the_waiting_request_is_the_bulk_jobs(people):
    carl, omar = people
    anchor, _, _ = [run_with_an_effect(), run_with_an_effect(), run_with_an_effect()]
    job = bulk_terminate(user=carl)
    records = AuditRecord.objects.count()

    outcome = act("terminate", anchor.pk, user=omar, given=ActionInput(reason="duplicate"))

    assert outcome.approval.pk == job.approval_id and not outcome.created
    assert (f"approval request {job.approval_id} already asks it for this run among the 3 "
            f"runs of bulk job {job.pk}, asked by carl") in outcome.message
    assert "Nothing was done yet" in outcome.message
    assert ApprovalRequest.objects.count() == 1
    assert AuditRecord.objects.count() == records
    assert Run.objects.get(pk=anchor.pk).status == RunStatus.ATTENTION
