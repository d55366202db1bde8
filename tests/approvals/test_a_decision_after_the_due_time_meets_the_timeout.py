"""A decision that arrives after its request's due time, before the sweep has timed the
request out, is refused, and the request's timeout is applied then, in the decision's
transaction, by the function the sweep uses: the run goes the same way whichever comes
first, the run's log holds one timeout decision, and the sweep finds nothing left to do.
Every way of deciding (the approver's page, the API, a four-eyes request, an agent's tool
call) meets it. "Due" is judged by the database's clock, as the sweep judges it."""

import uuid
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.db.models.functions import Now
from django.urls import reverse
from django.utils import timezone

from api.tokens import token_create
from approvals import decisions, requests, schedule
from approvals.models import DECIDE_PERMISSION, ApprovalRequest, Notification, RequestStatus
from approvals.notifications import time_text
from audit.models import AuditRecord
from console.roles import ensure_roles
from demo.sandbox.models import LedgerEntry
from runs import store
from runs.models import AttentionReason, Run, RunStatus, StepStatus, ToolCall
from tests.agent_runs import LARGE, advance, start_triage
from tests.approvals.conftest import later, open_request, waiting_run
from tests.factories import new_run, place, step

pytestmark = pytest.mark.django_db


def _records(run, action):
    return AuditRecord.objects.filter(run_id=run.pk if hasattr(run, "pk") else run,
                                      action=action)


def _nothing_left(report):
    return (report.timed_out, report.escalated, report.settled) == (0, 0, 0)


def test_an_approval_after_the_due_time_is_refused_and_the_timeout_rejects_once(
        pending, ann, bob, t0, script):
    # test-approval: rejected by its timeout policy after 3 days; no sweep has come by.
    due = pending.due_at
    result = decisions.decide(pending.pk, user=ann, approved=True, decision_id=uuid.uuid4(),
                              now=later(t0, days=3, seconds=1))

    assert result.outcome == "closed" and not result.recorded
    assert result.message == (
        f"This request timed out at {time_text(due)}; its timeout (reject) applies: no "
        "decision within 3 days: rejected by the timeout policy. Your decision was not "
        "recorded.")
    pending.refresh_from_db()
    assert pending.status == RequestStatus.REJECTED
    assert (pending.decided_by, pending.decision_id) == (None, None)
    assert pending.decided_by_label == "approvals"
    assert pending.decided_at == later(t0, days=3, seconds=1)
    assert pending.settled_at is not None and pending.apply_error == ""
    run = Run.objects.get(pk=pending.run_id)
    assert run.status == RunStatus.ATTENTION
    assert run.attention_reason == AttentionReason.APPROVAL_REJECTED
    (decided,) = _records(run, "approval_decided")
    assert (decided.actor_kind, decided.actor_label) == ("system", "approvals")
    assert decided.data["approved"] is False

    # The sweep that comes by afterwards has nothing left to time out or apply...
    assert _nothing_left(schedule.sweep(now=later(t0, days=3, seconds=2)))
    assert _nothing_left(schedule.sweep(now=later(t0, days=5)))
    # ...and a second approver is told the same; nothing more is written.
    again = decisions.decide(pending.pk, user=bob, approved=True, decision_id=uuid.uuid4(),
                             now=later(t0, days=4))
    assert (again.outcome, again.message) == ("closed", result.message)
    assert _records(run, "approval_decided").count() == 1
    assert "pay" not in [c[0] for c in script.calls]


def test_the_run_goes_the_same_way_whether_the_sweep_or_the_late_decision_comes_first(
        ann, t0):
    # test-approval-cancel: user:ann, cancel after 1 day (the run waits for an operator).
    swept_first = waiting_run("test-approval-cancel")
    decided_first = waiting_run("test-approval-cancel")
    assert requests.open_pending_requests(now=t0) == 2
    by_sweep, by_decision = (ApprovalRequest.objects.get(run=run)
                             for run in (swept_first, decided_first))
    ApprovalRequest.objects.filter(pk=by_decision.pk).update(
        due_at=later(t0, days=1, hours=1))  # not yet due when the sweep comes by
    moment = later(t0, days=1)
    assert schedule.sweep(now=moment).timed_out == 1
    ApprovalRequest.objects.filter(pk=by_decision.pk).update(due_at=later(t0, days=1))

    late = [decisions.decide(request.pk, user=ann, approved=True, decision_id=uuid.uuid4(),
                             now=moment) for request in (by_sweep, by_decision)]

    assert [d.outcome for d in late] == ["closed", "closed"]
    assert late[0].message == late[1].message
    assert "timed out at" in late[0].message and "its timeout (cancel) applies" \
        in late[0].message
    for request, run in ((by_sweep, swept_first), (by_decision, decided_first)):
        request.refresh_from_db()
        assert request.status == RequestStatus.EXPIRED and request.settled_at is not None
        assert request.comment == "no decision within 24 hours"
        run.refresh_from_db()
        assert (run.status, run.attention_reason) == (RunStatus.ATTENTION,
                                                      AttentionReason.APPROVAL_TIMED_OUT)
        assert step(run, "approve").status == StepStatus.WAITING
        assert _records(run, "approval_timed_out").count() == 1
        assert not _records(run, "approval_decided").exists()
    assert _nothing_left(schedule.sweep(now=later(t0, days=2)))
    assert _records(decided_first, "approval_timed_out").count() == 1


def test_an_escalation_a_decision_finds_due_is_made_and_the_decision_taken_after_it(
        approvers, ann, dora, t0):
    """Escalation leaves the request open to its approvers, the deputies added: a decision
    that finds it due escalates it, as the sweep would, and is then taken as it would be
    after the sweep's escalation."""
    run = waiting_run("test-approval-escalate")  # 2 days, then group:finance-deputies
    request = open_request(run, t0)
    result = decisions.decide(request.pk, user=ann, approved=True, decision_id=uuid.uuid4(),
                              now=later(t0, days=2, minutes=1))

    assert result.recorded
    request.refresh_from_db()
    assert request.status == RequestStatus.APPROVED and request.escalation_level == 1
    assert request.due_at == later(t0, days=4, minutes=1)
    assert User.objects.get(pk=dora.pk).has_perm(DECIDE_PERMISSION, request)
    assert Notification.objects.filter(request=request, kind="escalation").count() == 1
    assert _records(run, "approval_escalated").count() == 1
    assert Run.objects.get(pk=run.pk).status == RunStatus.QUEUED
    assert _nothing_left(schedule.sweep(now=later(t0, days=5)))
    assert _records(run, "approval_escalated").count() == 1


@pytest.fixture
def estimate_behind(monkeypatch):
    """This process's estimate of the database's clock an hour behind it (as for a while
    after this host's own clock stepped back an hour, until the offset is measured again)."""
    measured = type(store.current()).now
    monkeypatch.setattr(type(store.current()), "now",
                        lambda db: measured(db) - timedelta(hours=1))


@pytest.mark.usefixtures("estimate_behind")
def test_the_approvers_page_refuses_a_request_past_due_by_the_databases_clock(
        pending, ann, client):
    # Due in half an hour by this process's estimate: already past by the database's clock.
    ApprovalRequest.objects.filter(pk=pending.pk).update(due_at=Now() - timedelta(minutes=30))
    client.force_login(ann)
    response = client.post(reverse("approvals:decide", kwargs={"pk": pending.pk}),
                           {"decision": "approve", "comment": "",
                            "decision_id": str(uuid.uuid4())}, follow=True)

    assert b"This request timed out at" in response.content
    assert b"its timeout (reject) applies" in response.content
    pending.refresh_from_db()
    assert pending.status == RequestStatus.REJECTED and pending.decided_by is None
    assert Run.objects.get(pk=pending.run_id).status == RunStatus.ATTENTION
    assert _records(pending.run_id, "approval_decided").get().actor_label == "approvals"


def test_a_four_eyes_approval_over_the_api_after_the_due_time_takes_no_action(client):
    ensure_roles(Group, Permission)
    olga, carl = User.objects.create_user("olga"), User.objects.create_user("carl")
    for user in (olga, carl):
        user.groups.add(Group.objects.get(name="operators"))

    def bearer(user):
        _, plaintext = token_create(name=user.username, workflows=["test-orders"],
                                    acting_user=user)
        return {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}

    run = place(new_run(), status=RunStatus.ATTENTION,
                step_statuses={"create-task": StepStatus.SUCCEEDED,
                               "post-ledger": StepStatus.SUCCEEDED})
    asked = client.post(f"/api/runs/{run.pk}/actions/terminate", {"reason": "fraud"},
                        content_type="application/json", **bearer(olga))
    assert asked.status_code == 202, asked.content
    request_id = asked.json()["approval_request"]["id"]
    # Its day has passed by the database's clock; the sweep has not come by.
    ApprovalRequest.objects.filter(pk=request_id).update(due_at=Now() - timedelta(minutes=1))

    decided = client.post(f"/api/approvals/{request_id}/decision",
                          {"approve": True, "decision_id": str(uuid.uuid4()),
                           "comment": "checked"},
                          content_type="application/json", **bearer(carl))

    assert decided.status_code == 409
    assert decided.json()["error"] == "closed"
    assert "timed out at" in decided.json()["detail"]
    assert "its timeout (cancel) applies" in decided.json()["detail"]
    request = ApprovalRequest.objects.get(pk=request_id)
    assert request.status == RequestStatus.EXPIRED and request.decided_by is None
    assert request.settled_at is not None
    assert Run.objects.get(pk=run.pk).status == RunStatus.ATTENTION
    assert not _records(run, "terminated").exists()
    (said,) = _records(run, "approval_decided")
    assert said.data["decision"] == "expired" and said.data["taken"] is False
    assert _nothing_left(schedule.sweep())
    assert _records(run, "approval_decided").count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_tool_call_approved_after_its_due_time_is_declined_and_never_runs(
        live_sandbox, approvers, ann, dora):
    # invoice-triage: a large posting waits for group:approvers; 2 days, then the deputies,
    # then declined.
    run = advance(start_triage(LARGE))
    assert run.status == RunStatus.WAITING, run.status_message
    t0 = timezone.now()
    schedule.sweep(now=t0)
    request = ApprovalRequest.objects.get(run=run)
    assert schedule.sweep(now=t0 + timedelta(days=2, minutes=1)).escalated == 1

    result = decisions.decide(request.pk, user=ann, approved=True, decision_id=uuid.uuid4(),
                              now=t0 + timedelta(days=4, minutes=2))

    assert result.outcome == "closed" and "its timeout (escalate) applies" in result.message
    request.refresh_from_db()
    assert request.status == RequestStatus.EXPIRED and request.settled_at is not None
    assert request.apply_error == ""
    assert ToolCall.objects.get(pk=request.tool_call_id).status == "declined"
    decisions_on_the_call = _records(run, "tool_call_approval_decided")
    assert decisions_on_the_call.count() == 1
    assert decisions_on_the_call.get().actor_label == "approvals"
    assert _nothing_left(schedule.sweep(now=t0 + timedelta(days=4, minutes=3)))
    assert decisions_on_the_call.count() == 1
    # The agent goes on without the call, told it was declined; nothing was posted.
    assert Run.objects.get(pk=run.pk).status == RunStatus.QUEUED
    assert LedgerEntry.objects.count() == 0
