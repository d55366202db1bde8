"""Decisions: recorded once, first one wins, never applied to a payload it did not see,
never lost between the request and the run, refused to anyone who is not an approver."""

import threading
import uuid

import pytest
from django.contrib.auth.models import Permission, User
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.urls import reverse

from approvals import application, decisions, notifications, requests, schedule
from approvals.models import ApprovalRequest, Notification
from audit.chain import Actor
from audit.models import AuditRecord
from runs.execution import executor
from runs.machine import transitions
from runs.models import AttentionReason, Run, RunStatus, Step, StepStatus
from tests.approvals.conftest import later, open_request, waiting_run
from tests.factories import step

pytestmark = pytest.mark.django_db


def _decided_records(run_id):
    return AuditRecord.objects.filter(run_id=run_id, action="approval_decided")


def _post(client, request, decision="approve", comment="", decision_id=None):
    return client.post(reverse("approvals:decide", kwargs={"pk": request.pk}), {
        "decision": decision, "comment": comment,
        "decision_id": str(decision_id or uuid.uuid4())})


def test_an_approval_from_the_page_resumes_the_run_and_it_completes(pending, ann, client,
                                                                    script):
    client.force_login(ann)
    page = client.get(reverse("approvals:detail", kwargs={"pk": pending.pk}))
    decision_id = page.context["form"].initial["decision_id"]
    response = _post(client, pending, comment="looks right", decision_id=decision_id)
    assert response.status_code == 302
    assert response["Location"] == reverse("approvals:detail", kwargs={"pk": pending.pk})

    pending.refresh_from_db()
    assert pending.status == "approved" and pending.decided_by == ann
    assert pending.decision_id == decision_id and pending.comment == "looks right"
    assert pending.settled_at is not None and pending.apply_error == ""
    run = Run.objects.get(pk=pending.run_id)
    assert run.status == RunStatus.QUEUED
    record = _decided_records(run.pk).get()
    assert (record.actor_kind, record.actor_label, record.actor_user_id) == ("user", "ann",
                                                                            ann.pk)
    assert record.data == {"approved": True, "approval_request": pending.pk,
                           "payload_hash": pending.snapshot_hash,
                           "decision_id": str(decision_id)}
    assert record.reason == "looks right"

    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    assert [c[0] for c in script.calls].count("pay") == 1
    assert len(script.effects) == 1
    page = client.get(reverse("approvals:detail", kwargs={"pk": pending.pk}))
    assert b"Your decision (approved) is recorded." in page.content
    assert b'name="decision"' not in page.content  # no form on a decided request


def test_a_rejection_stops_the_run_for_an_operator_and_needs_a_reason(pending, ann, client,
                                                                      script):
    client.force_login(ann)
    response = _post(client, pending, decision="reject", comment="")
    assert response.status_code == 400 and b"Say why you reject it." in response.content
    pending.refresh_from_db()
    assert pending.status == "pending" and not _decided_records(pending.run_id).exists()

    _post(client, pending, decision="reject", comment="not our vendor")
    pending.refresh_from_db()
    assert pending.status == "rejected" and pending.settled_at is not None
    run = Run.objects.get(pk=pending.run_id)
    assert run.status == RunStatus.ATTENTION
    assert run.attention_reason == AttentionReason.APPROVAL_REJECTED
    assert step(run, "approve").status == StepStatus.FAILED
    assert executor.advance_run(run.pk, worker="w1") is None  # nothing to run
    assert "pay" not in [c[0] for c in script.calls]


def test_the_same_decision_twice_changes_nothing_the_second_time(pending, ann, client):
    client.force_login(ann)
    decision_id = uuid.uuid4()
    _post(client, pending, decision_id=decision_id)
    records = AuditRecord.objects.filter(run_id=pending.run_id).count()
    pending.refresh_from_db()
    first = (pending.status, pending.decided_at, pending.settled_at)

    # The same form with the opposite decision is refused, never taken for the first.
    response = _post(client, pending, decision="reject", comment="changed my mind",
                     decision_id=decision_id)
    assert response.status_code == 302
    page = client.get(response["Location"])
    assert b"was already used to record approved" in page.content
    pending.refresh_from_db()
    assert (pending.status, pending.decided_at, pending.settled_at) == first
    assert AuditRecord.objects.filter(run_id=pending.run_id).count() == records
    assert _decided_records(pending.run_id).count() == 1

    again = decisions.decide(pending.pk, user=ann, approved=True, decision_id=decision_id)
    assert again.outcome == "already_recorded" and not again.recorded
    assert _decided_records(pending.run_id).count() == 1


def test_a_second_approver_is_told_who_decided_first_and_when(pending, ann, bob):
    first = decisions.decide(pending.pk, user=ann, approved=True, decision_id=uuid.uuid4())
    second = decisions.decide(pending.pk, user=bob, approved=False, comment="no",
                              decision_id=uuid.uuid4())
    assert first.recorded and second.outcome == "already_decided"
    assert "Already approved by ann at" in second.message
    pending.refresh_from_db()
    assert pending.status == "approved" and pending.decided_by_label == "ann"
    assert _decided_records(pending.run_id).count() == 1


@pytest.mark.django_db(transaction=True)
def test_two_approvers_racing_the_first_wins_and_the_second_is_told(approvers, ann, bob):
    request = open_request(waiting_run())
    barrier = threading.Barrier(2)
    results = {}

    def decide(user, approved):
        try:
            barrier.wait(timeout=10)
            results[user.username] = decisions.decide(
                request.pk, user=user, approved=approved, comment=f"{user.username} decides",
                decision_id=uuid.uuid4())
        except Exception as exc:  # pragma: no cover - surfaced by the assertions below
            results[user.username] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=decide, args=(ann, True)),
               threading.Thread(target=decide, args=(bob, False))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)

    outcomes = sorted(r.outcome for r in results.values())
    assert outcomes == ["already_decided", "recorded"], results
    winner = next(name for name, r in results.items() if r.recorded)
    loser = next(r for r in results.values() if not r.recorded)
    request.refresh_from_db()
    assert request.decided_by_label == winner
    assert f"by {winner} at" in loser.message
    assert request.status == ("approved" if winner == "ann" else "rejected")
    assert _decided_records(request.run_id).count() == 1
    run = Run.objects.get(pk=request.run_id)
    assert run.status == (RunStatus.QUEUED if winner == "ann" else RunStatus.ATTENTION)


def test_a_changed_payload_supersedes_the_request_and_the_approval_is_refused(pending, ann,
                                                                             mailoutbox):
    # An operator corrected an earlier step's result while the request waited.
    Step.objects.filter(run_id=pending.run_id, name="prepare").update(
        result={"order": "corrected-order"})
    audit_before = AuditRecord.objects.filter(run_id=pending.run_id).count()

    result = decisions.decide(pending.pk, user=ann, approved=True, decision_id=uuid.uuid4())

    assert result.outcome == "superseded" and not result.recorded
    pending.refresh_from_db()
    new = result.new_request
    assert pending.status == "superseded" and pending.superseded_by == new
    assert pending.decision_id is None and pending.decided_by is None
    assert new.status == "pending" and new.snapshot["order"] == "corrected-order"
    assert new.snapshot_hash != pending.snapshot_hash
    assert Notification.objects.filter(request=new, kind="request").count() == 2
    # Nothing reached the run: still waiting on the same step, no decision recorded.
    run = Run.objects.get(pk=pending.run_id)
    assert run.status == RunStatus.WAITING
    assert step(run, "approve").status == StepStatus.WAITING
    # The run's chain holds the lifecycle, in order: the old request superseded, the new
    # one opened, and no decision.
    added = list(AuditRecord.objects.filter(run=run).order_by("seq")[audit_before:]
                 .values_list("action", "data__approval_request"))
    assert added == [("approval_superseded", pending.pk), ("approval_opened", new.pk)]

    # The old request's pending notifications are never sent; the new one's are.
    report = notifications.publish_notifications()
    assert (report.sent, report.skipped) == (2, 2)
    assert all(f"/approvals/{new.pk}/link/" in m.body for m in mailoutbox)

    approved = decisions.decide(new.pk, user=ann, approved=True, decision_id=uuid.uuid4())
    assert approved.recorded
    assert Run.objects.get(pk=run.pk).status == RunStatus.QUEUED
    assert decisions.decide(pending.pk, user=ann, approved=True,
                            decision_id=uuid.uuid4()).outcome == "closed"


def test_a_decision_on_a_run_terminated_meanwhile_withdraws_the_request(pending, ann):
    """The run stopped waiting before the sweep withdrew the request: the decision withdraws
    it as the sweep would, so what the request ends as does not depend on which came
    first, and nobody is recorded as approving what nobody can apply."""
    transitions.terminate(pending.run_id, actor=Actor.system("ops"), reason="vendor fraud")
    result = decisions.decide(pending.pk, user=ann, approved=True, decision_id=uuid.uuid4())
    assert result.outcome == "closed" and "withdrawn" in result.message
    assert "the run ended: it was terminated" in result.message
    pending.refresh_from_db()
    assert pending.status == "withdrawn" and pending.decided_by is None
    assert pending.decision_id is None and pending.settled_at is not None
    assert Run.objects.get(pk=pending.run_id).status == RunStatus.TERMINATED
    assert not _decided_records(pending.run_id).exists()
    assert AuditRecord.objects.filter(run_id=pending.run_id,
                                      action="approval_withdrawn").count() == 1
    assert schedule.withdraw_stale_requests() == 0


def test_a_crash_between_the_decision_and_the_run_loses_nothing(pending, ann, monkeypatch, t0):
    def worker_died(*args, **kwargs):
        raise RuntimeError("connection to the database lost")

    monkeypatch.setattr(application.transitions, "decide_approval", worker_died)
    result = decisions.decide(pending.pk, user=ann, approved=True, decision_id=uuid.uuid4(),
                              now=t0)
    assert result.recorded
    pending.refresh_from_db()
    assert pending.status == "approved" and pending.settled_at is None
    assert "connection to the database lost" in pending.apply_error
    assert Run.objects.get(pk=pending.run_id).status == RunStatus.WAITING
    # The open, decided request blocks a second request for the same step.
    assert requests.open_pending_requests(now=t0) == 0

    monkeypatch.undo()
    assert application.apply_pending_decisions(now=later(t0, seconds=59)) == 0
    assert application.apply_pending_decisions(now=later(t0, seconds=60)) == 1
    pending.refresh_from_db()
    assert pending.settled_at is not None and pending.apply_error == ""
    assert Run.objects.get(pk=pending.run_id).status == RunStatus.QUEUED
    assert _decided_records(pending.run_id).get().actor_label == "ann"
    # An apply_to_run that finds its decision already applied (it died after the run's commit)
    # records no error and applies nothing twice.
    ApprovalRequest.objects.filter(pk=pending.pk).update(settled_at=None)
    run = Run.objects.get(pk=pending.run_id)
    Run.objects.filter(pk=run.pk).update(status=RunStatus.WAITING)
    assert application.apply_to_run(pending.pk, now=later(t0, seconds=120))
    pending.refresh_from_db()
    assert pending.apply_error == "" and _decided_records(run.pk).count() == 1


def test_someone_who_is_not_an_approver_is_answered_not_found_and_nothing_changes(
        pending, carol, client, caplog):
    client.force_login(carol)
    records = AuditRecord.objects.filter(run_id=pending.run_id).count()
    detail = client.get(reverse("approvals:detail", kwargs={"pk": pending.pk}))
    # As a request that does not exist (tests/approvals/test_a_request_one_may_not_see_is_
    # answered_as_one_that_does_not_exist.py).
    assert detail.status_code == 404
    assert pending.snapshot["order"].encode() not in detail.content
    response = _post(client, pending)
    assert response.status_code == 404
    assert b"You may not decide this request" not in response.content
    with pytest.raises(PermissionDenied):
        decisions.decide(pending.pk, user=carol, approved=True, decision_id=uuid.uuid4())
    pending.refresh_from_db()
    assert pending.status == "pending" and pending.decision_id is None
    assert AuditRecord.objects.filter(run_id=pending.run_id).count() == records
    assert Run.objects.get(pk=pending.run_id).status == RunStatus.WAITING
    assert caplog.text.count(f"approval request {pending.pk}: carol") == 3


def test_superusers_and_holders_of_the_global_permission_may_decide(pending, carol, db):
    root = User.objects.create_superuser("root", "root@example.com", "pw")
    assert decisions.decide(pending.pk, user=root, approved=True,
                            decision_id=uuid.uuid4()).recorded
    other = open_request(waiting_run())
    carol.user_permissions.add(Permission.objects.get(codename="decide_approvalrequest"))
    carol = User.objects.get(pk=carol.pk)
    assert decisions.decide(other.pk, user=carol, approved=True,
                            decision_id=uuid.uuid4()).recorded


def test_an_inactive_approver_may_not_decide(pending, ann):
    ann.is_active = False
    ann.save()
    with pytest.raises(PermissionDenied):
        decisions.decide(pending.pk, user=ann, approved=True, decision_id=uuid.uuid4())
