"""A decision is applied to the run in the transaction that records it: a crash in between
leaves neither, and a decision already applied is recognised by its id."""

import uuid

import pytest

from approvals import application, decisions
from approvals.models import ApprovalRequest
from audit.models import AuditRecord
from runs.models import Run, RunStatus

pytestmark = pytest.mark.django_db


def _decided(run_id):
    return AuditRecord.objects.filter(run_id=run_id, action="approval_decided")


def test_a_crash_after_the_run_changed_leaves_neither_decision_nor_application(
        pending, ann, monkeypatch, t0):
    def killed(*args, **kwargs):
        raise RuntimeError("the process was killed")

    monkeypatch.setattr(application, "_mark_applied", killed)
    first = uuid.uuid4()
    with pytest.raises(RuntimeError):
        decisions.decide(pending.pk, user=ann, approved=True, decision_id=first, now=t0)
    pending.refresh_from_db()
    assert pending.status == "pending" and pending.decision_id is None
    assert Run.objects.get(pk=pending.run_id).status == RunStatus.WAITING
    assert not _decided(pending.run_id).exists()

    monkeypatch.undo()
    again = uuid.uuid4()
    result = decisions.decide(pending.pk, user=ann, approved=True, decision_id=again, now=t0)
    assert result.recorded
    pending.refresh_from_db()
    assert pending.settled_at is not None and pending.apply_error == ""
    assert Run.objects.get(pk=pending.run_id).status == RunStatus.QUEUED
    assert _decided(pending.run_id).get().data["decision_id"] == str(again)


def test_a_decision_already_applied_is_recognised_by_its_id(pending, ann, t0):
    decision_id = uuid.uuid4()
    decisions.decide(pending.pk, user=ann, approved=True, decision_id=decision_id, now=t0,
                     comment="fine")
    # As if the request had not been marked settled: the run's record carries the id.
    ApprovalRequest.objects.filter(pk=pending.pk).update(settled_at=None, comment="edited")
    Run.objects.filter(pk=pending.run_id).update(status=RunStatus.WAITING)
    assert application.apply_to_run(pending.pk, now=t0)
    pending.refresh_from_db()
    assert pending.apply_error == "" and _decided(pending.run_id).count() == 1
