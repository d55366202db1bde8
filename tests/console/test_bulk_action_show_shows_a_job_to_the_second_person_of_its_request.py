"""bulk_action show JOB follows the rule of the job's console page and of the API's GET
(approvals.bulk.may_watch): the person who started the job, a superuser, and the second
person of the job's four-eyes request (who decided it, or may decide it while it waits).
show held them to cancel's rule (may_follow), so the approver the request's page sends to
the job was refused at the command line what the console showed them. cancel keeps its
rule: the approver never cancels, and a person with nothing to do with the job sees
nothing."""

import io
import json
import uuid

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import CommandError, call_command

from approvals.decisions import decide
from approvals.models import BulkJob, BulkJobStatus
from tests.approvals.bulk_requests import bulk_terminate, run_with_an_effect

pytestmark = pytest.mark.django_db


@pytest.fixture
def people(roles):
    """olga and vera, operators, may decide the job's request; carl, an operator, starts
    it; abe decides approvals of other kinds and has nothing to do with the job."""
    users = [User.objects.create_user(name, password="pw")
             for name in ("olga", "vera", "carl", "abe")]
    for user in users[:3]:
        user.groups.add(Group.objects.get(name="operators"))
    users[3].groups.add(Group.objects.get(name="approvers"))
    return users


@pytest.fixture
def job(people) -> BulkJob:
    for _ in range(2):
        run_with_an_effect()
    job = bulk_terminate(user=people[2])
    assert job.approval.is_pending
    return job


def command(verb: str, job: BulkJob, user: str) -> str:
    out = io.StringIO()
    call_command("bulk_action", verb, str(job.pk), "--user", user, "--json", stdout=out)
    return out.getvalue()


def test_who_may_decide_the_request_is_shown_the_job_and_nobody_else_is(job):
    for user in ("olga", "vera", "carl"):
        shown = json.loads(command("show", job, user))
        assert (shown["job"], shown["outcomes"], shown["approval_request"]) == (
            job.pk, {"second_person": 2}, job.approval_id)

    with pytest.raises(CommandError, match=(
            f"^bulk job {job.pk} is another person's: only carl, a superuser or the second "
            "person of its request may show it$")):
        command("show", job, "abe")


def test_the_approver_is_shown_the_job_once_decided_and_never_cancels_it(job, people):
    olga = people[0]
    assert decide(job.approval_id, user=olga, approved=True,
                  decision_id=uuid.uuid4()).recorded

    shown = json.loads(command("show", job, "olga"))
    assert (shown["status"], shown["phase"]) == ("running", "applying")
    # Decided by olga: vera may decide it no more, and is shown it no more.
    with pytest.raises(CommandError, match="may show it$"):
        command("show", job, "vera")
    with pytest.raises(CommandError, match=(
            f"^bulk job {job.pk} is another person's: only carl or a superuser may cancel "
            "it$")):
        command("cancel", job, "olga")
    fresh = BulkJob.objects.get(pk=job.pk)
    assert (fresh.status, fresh.cancelled_by_id) == (BulkJobStatus.RUNNING, None)
