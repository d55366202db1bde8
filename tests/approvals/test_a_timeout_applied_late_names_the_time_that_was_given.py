"""A request its timeout ends says it had no decision within the time it was given (its
requested time to its due time), however late the timeout is applied: the sweep may be
stopped for days, and a person deciding then applies it themselves. It said the time from
the request to whenever the timeout was applied ("no decision within 4.0 days" of a
request given one day), so the run's record, the request page and the late person's
refusal named a time nobody had set, different by who came first."""

import uuid

import pytest

from approvals import decisions, schedule
from approvals.models import RequestStatus
from audit.models import AuditRecord
from tests.approvals.conftest import later, open_request, waiting_run

pytestmark = pytest.mark.django_db


def test_the_sweep_days_late_names_the_day_that_was_given(ann, t0):
    # test-approval-cancel: user:ann, cancel after 1 day.
    request = open_request(waiting_run("test-approval-cancel"), t0)
    assert schedule.sweep(now=later(t0, days=4)).timed_out == 1
    request.refresh_from_db()
    assert request.status == RequestStatus.EXPIRED
    assert request.comment == "no decision within 24 hours"
    record = AuditRecord.objects.get(run_id=request.run_id, action="approval_timed_out")
    assert "4 days" not in record.reason


def test_a_decision_days_late_names_the_day_that_was_given(ann, t0):
    request = open_request(waiting_run("test-approval-cancel"), t0)
    late = decisions.decide(request.pk, user=ann, approved=True, decision_id=uuid.uuid4(),
                            now=later(t0, days=4))
    assert late.outcome == "closed"
    assert "no decision within 24 hours" in late.message
    request.refresh_from_db()
    assert request.status == RequestStatus.EXPIRED and request.decision_id is None
    assert request.comment == "no decision within 24 hours"
