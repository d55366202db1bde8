"""The operator's surface over the API: list and search runs with the console's filters and
keyset paging, every action of the table as the token's person (200 done, 202 four eyes,
409 the refusal, 403 without permission), a run's history, and approval decisions."""

import uuid

import pytest
from django.contrib.auth.models import Group, Permission, User

from api.tokens import token_create
from approvals.models import ApprovalRequest, RequestStatus
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.models import Run, RunStatus, StepStatus
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


@pytest.fixture
def people(db):
    ensure_roles(Group, Permission)
    olga = User.objects.create_user("olga")
    carl = User.objects.create_user("carl")
    aude = User.objects.create_user("aude")
    for user in (olga, carl):
        user.groups.add(Group.objects.get(name="operators"))
    aude.groups.add(Group.objects.get(name="auditors"))
    return {"olga": olga, "carl": carl, "aude": aude}


@pytest.fixture
def bearer(people):
    """bearer(person or None, workflows) -> the Authorization header of a new token."""
    made = iter(range(1000))

    def make(person=None, workflows=("test-orders",)):
        _, plaintext = token_create(name=f"t{next(made)}", workflows=list(workflows),
                                    acting_user=people[person] if person else None)
        return {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}

    return make


def _act(client, headers, run, action, **body):
    return client.post(f"/api/runs/{run.pk}/actions/{action}", body,
                       content_type="application/json", **headers)


def _failed_run():
    return place(new_run(), status=RunStatus.ATTENTION,
                 step_statuses={"create-task": StepStatus.FAILED})


def _effected_run():
    return place(new_run(), status=RunStatus.ATTENTION,
                 step_statuses={"create-task": StepStatus.SUCCEEDED,
                                "post-ledger": StepStatus.SUCCEEDED})


def test_the_list_filters_searches_and_pages_by_keyset_within_the_tokens_workflows(
        client, bearer):
    runs = [_failed_run() for _ in range(3)]
    new_run()  # queued: filtered out by status
    other = place(new_run("test-saga"), status=RunStatus.ATTENTION)
    headers = bearer()
    seen, after = [], ""
    for _ in range(4):
        page = client.get("/api/runs", {"status": "attention", "limit": 2, "after": after},
                          **headers).json()
        seen += [r["id"] for r in page["runs"]]
        after = page["next_cursor"]
        if after is None:
            break
    assert sorted(seen) == sorted(r.pk for r in runs) and other.pk not in seen
    assert len(seen) == len(set(seen))
    found = client.get("/api/runs", {"q": runs[1].business_key}, **headers).json()["runs"]
    assert [r["id"] for r in found] == [runs[1].pk]
    assert found[0]["state"] == "needs_attention" and found[0]["status"] == "attention"
    refused = client.get("/api/runs", {"status": "no-such-status"}, **headers)
    assert refused.status_code == 422


def test_an_action_is_taken_as_the_tokens_person_with_its_audit_record(client, bearer,
                                                                       people):
    run = _failed_run()
    response = _act(client, bearer("olga"), run, "retry_step", step="create-task",
                    reason="tracker fixed")
    assert response.status_code == 200, response.content
    assert response.json()["state"] == "accepted"
    record = AuditRecord.objects.get(run=run, action="step_retried")
    assert (record.actor_label, record.actor_user_id, record.reason) == (
        "olga", people["olga"].pk, "tracker fixed")


def test_refusals_change_nothing_and_say_why(client, bearer):
    run = _failed_run()
    before = Run.objects.get(pk=run.pk).audit_seq
    refused = _act(client, bearer("olga"), run, "reopen", reason="why not")
    assert refused.status_code == 409
    assert refused.json()["detail"].startswith(f"Reopen is not possible for run {run.pk}")
    assert _act(client, bearer(), run, "resume", reason="x").status_code == 403
    forbidden = _act(client, bearer("aude"), run, "resume", reason="x")
    assert forbidden.status_code == 403 and "aude may not resume" in forbidden.json()["detail"]
    assert _act(client, bearer("olga"), run, "retry_step", reason="x").status_code == 400
    assert _act(client, bearer("olga"), run, "resume").status_code == 422
    assert _act(client, bearer("olga"), run, "resume", reason="   ").status_code == 422
    assert _act(client, bearer("olga"), run, "fly", reason="x").status_code == 422
    saga = place(new_run("test-saga"), status=RunStatus.ATTENTION)
    assert _act(client, bearer("olga"), saga, "resume", reason="x").status_code == 404
    assert Run.objects.get(pk=run.pk).audit_seq == before
    assert Run.objects.get(pk=run.pk).status == RunStatus.ATTENTION


def test_four_eyes_over_the_api_the_second_person_decides_as_themselves(client, bearer,
                                                                       people):
    run = _effected_run()
    olga, carl = bearer("olga"), bearer("carl")
    pending = _act(client, olga, run, "terminate", reason="customer fraud")
    assert pending.status_code == 202, pending.content
    request_id = pending.json()["approval_request"]["id"]
    assert pending.json()["approval_request"]["requested_by"] == "olga"
    assert Run.objects.get(pk=run.pk).status == RunStatus.ATTENTION

    assert request_id not in [r["id"] for r in client.get("/api/approvals", **olga)
                              .json()["requests"]]
    assert request_id in [r["id"] for r in client.get("/api/approvals", **carl)
                          .json()["requests"]]
    decision = {"approve": True, "decision_id": str(uuid.uuid4()), "comment": "checked"}
    own = client.post(f"/api/approvals/{request_id}/decision", decision,
                      content_type="application/json", **olga)
    assert own.status_code == 403
    assert ApprovalRequest.objects.get(pk=request_id).status == RequestStatus.PENDING

    decided = client.post(f"/api/approvals/{request_id}/decision", decision,
                          content_type="application/json", **carl)
    assert decided.status_code == 200 and decided.json()["outcome"] == "recorded"
    again = client.post(f"/api/approvals/{request_id}/decision", decision,
                        content_type="application/json", **carl)
    assert again.json()["outcome"] == "already_recorded"
    assert Run.objects.get(pk=run.pk).status == RunStatus.TERMINATED
    record = AuditRecord.objects.get(run=run, action="terminated")
    assert record.actor_label == "olga" and record.data["approved_by"] == "carl"
    late = client.post(f"/api/approvals/{request_id}/decision",
                       {**decision, "decision_id": str(uuid.uuid4())},
                       content_type="application/json", **bearer("olga"))
    assert late.status_code in (403, 409)


def test_history_is_the_audit_trail_a_page_at_a_time(client, bearer):
    run = _failed_run()
    for reason in ("one", "two", "three"):
        _act(client, bearer("olga"), run, "terminate" if reason == "three" else "resume",
             reason=reason)
        if reason != "three":
            place(run, status=RunStatus.ATTENTION)  # as if it stopped again
    headers = bearer()
    first = client.get(f"/api/runs/{run.pk}/history", {"limit": 2}, **headers).json()
    older = client.get(f"/api/runs/{run.pk}/history", {"limit": 2, "before": first["older"]},
                       **headers).json()
    seqs = [e["seq"] for e in older["entries"]] + [e["seq"] for e in first["entries"]]
    assert seqs == sorted(seqs) and len(seqs) == 4
    assert first["entries"][-1]["action"] == "terminated"
    assert first["entries"][-1]["actor"] == "olga" and first["entries"][-1]["reason"] == "three"
    everything = client.get(f"/api/runs/{run.pk}/history", {"limit": 200}, **headers).json()
    assert [e["seq"] for e in everything["entries"]] == list(
        range(1, Run.objects.get(pk=run.pk).audit_seq + 1))
    assert everything["older"] is None
    assert client.get("/api/runs/999999999/history", **headers).status_code == 404


def test_the_workers_list_names_each_worker_and_only_the_tokens_runs_it_holds(client,
                                                                              bearer):
    from datetime import timedelta

    from django.utils import timezone

    from runs.models import Worker
    from runs.reads import workers

    workers.beat(name="host-a:101", queues="celery")
    workers.beat(name="host-b:202", queues="celery")
    Worker.objects.filter(name="host-b:202").update(
        heartbeat_at=timezone.now() - timedelta(minutes=10))
    mine, theirs = _failed_run(), place(new_run("test-saga"), status=RunStatus.ATTENTION)
    Run.objects.filter(pk__in=[mine.pk, theirs.pk]).update(
        status=RunStatus.RUNNING, lease_owner="host-a:101",
        lease_expires_at=timezone.now() + timedelta(seconds=30))

    page = client.get("/api/workers", **bearer()).json()

    by_name = {w["name"]: w for w in page["workers"]}
    assert by_name["host-a:101"]["held_runs"] == [mine.pk]  # not the other workflow's run
    assert by_name["host-a:101"]["silent"] is False
    assert by_name["host-b:202"]["silent"] is True and by_name["host-b:202"]["held_count"] == 0
    assert client.get("/api/workers", {"page": 2}, **bearer()).status_code == 422


def _decide(client, headers, request_id, **body):
    return client.post(f"/api/approvals/{request_id}/decision", body,
                       content_type="application/json", **headers)


def _terminate_request(client, headers) -> int:
    pending = _act(client, headers, _effected_run(), "terminate", reason="customer fraud")
    assert pending.status_code == 202, pending.content
    return pending.json()["approval_request"]["id"]


@pytest.mark.parametrize("approve", ["yes", "true", 1, "no", 0, None])
def test_a_decision_that_is_not_a_json_boolean_is_refused_naming_approve(client, bearer,
                                                                         approve):
    request_id = _terminate_request(client, bearer("olga"))
    response = _decide(client, bearer("carl"), request_id, approve=approve,
                       decision_id=str(uuid.uuid4()), comment="checked")
    assert response.status_code == 422, response.content
    assert ["approve"] in [e["loc"][-1:] for e in response.json()["errors"]]
    assert ApprovalRequest.objects.get(pk=request_id).status == RequestStatus.PENDING


def test_a_bulk_filter_that_is_not_a_json_boolean_is_refused(client, bearer):
    response = client.post("/api/bulk", {"action": "resume", "reason": "x",
                                         "filters": {"attention": "no"}},
                           content_type="application/json", **bearer("olga"))
    assert response.status_code == 422, response.content
    assert ["attention"] in [e["loc"][-1:] for e in response.json()["errors"]]


def test_a_decision_id_names_one_decision_on_one_request(client, bearer):
    olga, carl = bearer("olga"), bearer("carl")
    first, other = _terminate_request(client, olga), _terminate_request(client, olga)
    decision_id = str(uuid.uuid4())
    recorded = _decide(client, carl, first, approve=True, decision_id=decision_id)
    assert recorded.status_code == 200 and recorded.json()["outcome"] == "recorded"
    other_run = ApprovalRequest.objects.get(pk=other).run_id
    records = AuditRecord.objects.filter(run_id=other_run).count()

    # Another request: refused, and that request still waits for its own decision.
    reused = _decide(client, carl, other, approve=True, decision_id=decision_id)
    assert reused.status_code == 409, reused.content
    assert reused.json()["error"] == "decision_id_reused"
    assert f"approval request {first}" in reused.json()["detail"]
    assert ApprovalRequest.objects.get(pk=other).status == RequestStatus.PENDING
    assert ApprovalRequest.objects.get(pk=other).decision_id is None
    assert AuditRecord.objects.filter(run_id=other_run).count() == records

    # The same request with the opposite decision: refused, the first decision stands.
    records = AuditRecord.objects.filter(run_id=ApprovalRequest.objects.get(pk=first)
                                         .run_id).count()
    opposite = _decide(client, carl, first, approve=False, decision_id=decision_id,
                       comment="changed my mind")
    assert opposite.status_code == 409 and opposite.json()["error"] == "decision_id_reused"
    request = ApprovalRequest.objects.get(pk=first)
    assert request.status == RequestStatus.APPROVED and request.comment == ""
    assert AuditRecord.objects.filter(run_id=request.run_id).count() == records

    # The same decision again: the idempotent answer.
    again = _decide(client, carl, first, approve=True, decision_id=decision_id)
    assert again.status_code == 200 and again.json()["outcome"] == "already_recorded"


def test_a_rerun_request_shows_the_step_it_reruns(client, bearer):
    olga, carl = bearer("olga"), bearer("carl")
    pending = _act(client, olga, _effected_run(), "rerun_from_step", step="fetch",
                   reason="ledger lost it")
    assert pending.status_code == 202, pending.content
    assert pending.json()["approval_request"]["step"] == "fetch"
    listed = {r["id"]: r for r in client.get("/api/approvals", **carl).json()["requests"]}
    assert listed[pending.json()["approval_request"]["id"]]["step"] == "fetch"


def test_the_requester_is_told_it_is_four_eyes(client, bearer):
    olga = bearer("olga")
    request_id = _terminate_request(client, olga)
    own = _decide(client, olga, request_id, approve=True, decision_id=str(uuid.uuid4()))
    assert own.status_code == 403 and own.json()["error"] == "forbidden"
    assert "four eyes" in own.json()["detail"] and "you asked for" in own.json()["detail"]
