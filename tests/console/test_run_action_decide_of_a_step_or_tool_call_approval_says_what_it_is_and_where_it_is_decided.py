"""run_action --decide N decides four-eyes requests only. Given the id of a request that
exists but is an approval step's or an agent tool call's, it said "no four-eyes request N",
as if there were none, and the approver was left looking for a request that was there. Now
it says what N is and where it is decided (its page in the console, or the API), exits
with one line and decides, writes and records nothing. To a person who may not see the
request it is still "no four-eyes request N": its existence is not told."""

import io
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import CommandError, call_command
from django.utils import timezone

from approvals.models import ApprovalRequest, RequestKind, RequestStatus
from audit.models import AccessRecord, AuditRecord
from tests.factories import new_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def carl(monkeypatch):
    """An approver: he may decide approval requests, and proves who he is."""
    carl = User.objects.create_user("carl", password="carl-secret")
    carl.user_permissions.add(Permission.objects.get(codename="decide_approvalrequest"))
    monkeypatch.setenv("CLI_PASSWORD", "carl-secret")
    return carl


def request_of(kind: str, **fields) -> ApprovalRequest:
    now = timezone.now()
    return ApprovalRequest.objects.create(
        kind=kind, run=new_run(), snapshot={}, snapshot_hash="h", approvers=["user:carl"],
        timeout=timedelta(hours=1), on_timeout="reject", requested_at=now,
        due_at=now + timedelta(hours=1), **fields)


def decide(request_id: int, user: str = "carl") -> str:
    with pytest.raises(CommandError) as refused:
        call_command("run_action", "--decide", str(request_id), "--user", user,
                     stdout=io.StringIO())
    return str(refused.value)


def nothing_written(request: ApprovalRequest, audit: int, access: int) -> None:
    request.refresh_from_db()
    assert request.status == RequestStatus.PENDING and request.decided_by_id is None
    assert request.decided_at is None and request.decision_id is None
    assert AuditRecord.objects.count() == audit and AccessRecord.objects.count() == access


@pytest.mark.parametrize("kind, fields, said", [
    (RequestKind.TOOL_CALL, {"step_name": "triage",
                             "params": {"tool": "refund", "tool_call": "2.0"}},
     "is a tool-call approval (triage: tool refund (call 2.0) of run"),
    (RequestKind.STEP, {"step_name": "manager-approval"},
     "is a step approval (manager-approval of run"),
])
def test_a_step_or_tool_call_approval_is_named_with_where_it_is_decided(carl, kind, fields,
                                                                        said):
    request = request_of(kind, **fields)
    audit, access = AuditRecord.objects.count(), AccessRecord.objects.count()

    message = decide(request.pk)

    assert message.startswith(f"approval request {request.pk} {said}")
    assert "not a four-eyes request" in message
    assert f"/approvals/{request.pk}/" in message
    assert f"POST /api/approvals/{request.pk}/decision" in message
    assert message.endswith("nothing decided") and "\n" not in message
    nothing_written(request, audit, access)


def test_a_person_who_may_not_see_the_request_is_not_told_it_exists(carl, monkeypatch):
    User.objects.create_user("eve", password="eve-secret")
    monkeypatch.setenv("CLI_PASSWORD", "eve-secret")
    request = request_of(RequestKind.STEP, step_name="manager-approval")
    audit, access = AuditRecord.objects.count(), AccessRecord.objects.count()

    assert decide(request.pk, user="eve") == f"no four-eyes request {request.pk}"
    nothing_written(request, audit, access)


def test_an_id_no_request_has_is_still_no_four_eyes_request(carl):
    assert decide(987654) == "no four-eyes request 987654"
