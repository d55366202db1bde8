"""The drill kit's approver (approvals.drill) decides what drill runs wait for, through their
approval requests, and nothing else."""

import pytest
from django.core.exceptions import PermissionDenied

from approvals.drill import approve_for_drill
from approvals.models import ApprovalRequest, RequestStatus
from audit.models import AuditRecord
from runs.models import Run, RunStatus
from tests.approvals.conftest import open_request, waiting_run

pytestmark = pytest.mark.django_db


def test_the_drill_approver_decides_nothing_for_a_run_a_drill_did_not_start(approvers):
    run = waiting_run()
    request = open_request(run)
    records = AuditRecord.objects.filter(run=run).count()
    with pytest.raises(PermissionDenied, match="not a drill run"):
        approve_for_drill(run)
    request.refresh_from_db()
    run.refresh_from_db()
    assert request.status == RequestStatus.PENDING and request.settled_at is None
    assert run.status == RunStatus.WAITING
    assert AuditRecord.objects.filter(run=run).count() == records


def test_the_drill_approver_approves_a_drill_run_through_its_request(approvers):
    run = waiting_run()
    Run.objects.filter(pk=run.pk).update(drill=True)  # as the drill kit starts its runs
    run.refresh_from_db()
    assert approve_for_drill(run) is True
    request = ApprovalRequest.objects.get(run=run)
    assert request.status == RequestStatus.APPROVED
    assert request.decided_by.username == "drill"
