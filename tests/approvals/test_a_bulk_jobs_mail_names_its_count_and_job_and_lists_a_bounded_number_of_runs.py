"""The mail asking for a bulk job's approval listed every run of the job three times (its
runs, its params, each run's high-impact effects): about 53 bytes a run, stored for each
approver at each reminder. It now names how many runs and which job, lists the first
MAIL_RUNS_LISTED runs and effects then says how many more, and links the request's page,
which lists them all."""

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.core import mail

from approvals.models import ApprovalRequest, Notification
from approvals.notifications import MAIL_RUNS_LISTED, publish_notifications
from console.roles import ensure_roles
from tests.approvals.bulk_requests import bulk_terminate, run_with_an_effect

pytestmark = pytest.mark.django_db

RUNS = 100


@pytest.fixture
def people(db):
    """olga decides, carl asks."""
    ensure_roles(Group, Permission)
    users = [User.objects.create_user(name, email=f"{name}@example.com")
             for name in ("olga", "carl")]
    for user in users:
        user.groups.add(Group.objects.get(name="operators"))
    return users


def test_the_mail_of_a_job_of_100_runs_lists_20_and_counts_the_rest(people, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    olga, carl = people
    runs = sorted(run_with_an_effect().pk for _ in range(RUNS))
    job = bulk_terminate(user=carl)
    request = ApprovalRequest.objects.get(pk=job.approval_id)
    assert request.snapshot["runs"] == runs  # the request itself keeps every run

    body = Notification.objects.get(request=request, user=olga).body
    assert f"terminate of {RUNS} runs (bulk job {job.pk})" in body
    assert (f"each of the {RUNS} runs of bulk job {job.pk}. The first {MAIL_RUNS_LISTED} "
            "are listed here; the request's page, linked below, lists every one") in body
    listed = {line.strip()[2:] for line in body.splitlines() if line.startswith("    - ")}
    shown_runs = {str(pk) for pk in runs[:MAIL_RUNS_LISTED]}
    assert shown_runs <= listed
    assert not {str(pk) for pk in runs[MAIL_RUNS_LISTED:]} & listed
    assert body.count(f"and {RUNS - MAIL_RUNS_LISTED} more") == 2  # runs, then effects
    effects = [item for item in listed if item.startswith("run ")]
    assert len(effects) == MAIL_RUNS_LISTED
    assert not any(f"run {pk}:" in body for pk in runs[MAIL_RUNS_LISTED:])
    # The params no longer repeat the runs: the body stays the size of 20 runs' listing.
    assert '"runs"' not in body
    assert len(body.encode()) < 3000 < RUNS * 53

    assert publish_notifications().sent == 1
    (sent,) = mail.outbox
    assert sent.to == ["olga@example.com"]
    assert f"/approvals/{request.pk}/link/" in sent.body
    assert carl.email not in sent.to


def test_the_mail_of_a_job_of_a_few_runs_lists_each_and_says_no_more(people):
    olga, carl = people
    runs = sorted(run_with_an_effect().pk for _ in range(3))
    job = bulk_terminate(user=carl)
    body = Notification.objects.get(request_id=job.approval_id, user=olga).body
    assert "each of the 3 runs of bulk job" in body and "listed here" not in body
    listed = [line.strip()[2:] for line in body.splitlines() if line.startswith("    - ")]
    assert [item for item in listed if item.isdigit()] == [str(pk) for pk in runs]
    assert " more" not in body
