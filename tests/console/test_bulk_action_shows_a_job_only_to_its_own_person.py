"""bulk_action show JOB shows a bulk job as the API does: to the person who started it (or a
superuser, or the second person of its request), once they have given their password, the
way bulk_action cancel checks them.
Naming an unknown user, another person, or the starter without their password shows
nothing."""

import io
import json

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import CommandError, call_command

from approvals.models import BulkJob, BulkJobStatus
from runs.models import RunStatus
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


def _call(*args) -> str:
    out = io.StringIO()
    call_command(*map(str, args), stdout=out)
    return out.getvalue()


@pytest.fixture
def job(operator) -> BulkJob:
    place(new_run(), status=RunStatus.COMPLETED)
    started = json.loads(_call("bulk_action", "start", "terminate", "--user", "olga",
                               "--workflow", "test-orders", "--status", "completed",
                               "--reason", "cleanup", "--json"))
    return BulkJob.objects.get(pk=started["job"])


@pytest.fixture
def carl(operator):
    user = User.objects.create_user("carl", password="pw")
    user.groups.add(Group.objects.get(name="operators"))
    return user


def _unchanged(job: BulkJob) -> bool:
    fresh = BulkJob.objects.get(pk=job.pk)
    return fresh.status == BulkJobStatus.RUNNING and fresh.cancelled_by_id is None


@pytest.mark.parametrize(("user", "refusal"), [
    ("nobody", "^no user 'nobody'$"),
    ("carl", "^bulk job {job} is another person's: only olga, a superuser or the second person "
              "of its request may show it$"),
], ids=["an unknown user", "another person"])
def test_show_as_anyone_but_its_person_shows_nothing(job, carl, user, refusal):
    out = io.StringIO()
    with pytest.raises(CommandError, match=refusal.format(job=job.pk)):
        call_command("bulk_action", "show", str(job.pk), "--user", user, "--json", stdout=out)
    assert out.getvalue() == ""
    assert _unchanged(job)


def test_show_as_its_person_without_their_password_shows_nothing(job, monkeypatch):
    monkeypatch.setenv("CLI_PASSWORD", "not-olgas")
    out = io.StringIO()
    with pytest.raises(CommandError, match="^wrong password for olga; nothing was done$"):
        call_command("bulk_action", "show", str(job.pk), "--user", "olga", stdout=out)
    assert out.getvalue() == ""


def test_show_and_cancel_refuse_another_person_alike(job, carl):
    # One check for both: what show refuses, cancel refuses in the same words (cancel's
    # rule leaves out the second person of the job's request).
    with pytest.raises(CommandError, match="another person's: only olga or a superuser may "
                                           "cancel it$"):
        _call("bulk_action", "cancel", job.pk, "--user", "carl")
    assert _unchanged(job)


def test_its_person_and_a_superuser_are_shown_it(job):
    User.objects.create_superuser("root", password="pw")
    for user in ("olga", "root"):
        shown = json.loads(_call("bulk_action", "show", job.pk, "--user", user, "--json"))
        assert shown["job"] == job.pk and shown["action"] == "terminate"
        assert shown["status"] == BulkJobStatus.RUNNING and shown["total"] == 1
    assert _unchanged(job)
