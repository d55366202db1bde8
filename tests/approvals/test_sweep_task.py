"""The approvals sweep runs on Celery beat next to runs' sweeper, in every worker."""

import pytest

from approvals import tasks
from approvals.models import ApprovalRequest, Notification
from tests.approvals.conftest import waiting_run

pytestmark = pytest.mark.django_db


def test_beat_schedules_the_approvals_sweep_and_workers_know_the_task():
    from console.celery import app

    app.finalize(auto=True)
    assert "approvals.sweep" in app.tasks
    scheduled = [entry["task"] for entry in app.conf.beat_schedule.values()]
    assert "approvals.sweep" in scheduled and "runs.sweep" in scheduled


def test_the_task_opens_requests_and_delivers_their_emails(approvers, mailoutbox):
    waiting_run()
    report = tasks.sweep()
    assert report["opened"] == 1 and report["sent"] == 2
    assert ApprovalRequest.objects.count() == 1
    assert Notification.objects.filter(status="sent").count() == 2 and len(mailoutbox) == 2
    assert tasks.sweep()["opened"] == 0
