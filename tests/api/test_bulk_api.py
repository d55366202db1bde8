"""Bulk by filter over the API: POST /api/bulk starts the durable job as the token's person,
GET /api/bulk/{id} follows it, POST /api/bulk/{id}/cancel stops it; one audit record per
run, the runs needing a second person in one request."""

import uuid

import pytest
from django.contrib.auth.models import Group, Permission, User

from api.tokens import token_create
from approvals.bulk import run_bulk_job
from approvals.decisions import decide
from approvals.models import BulkJob
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.execution import executor
from runs.models import Run, RunStatus, StepStatus
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


@pytest.fixture
def people(db):
    ensure_roles(Group, Permission)
    olga, carl = User.objects.create_user("olga"), User.objects.create_user("carl")
    for user in (olga, carl):
        user.groups.add(Group.objects.get(name="operators"))
    return {"olga": olga, "carl": carl}


@pytest.fixture
def bearer(people):
    made = iter(range(1000))

    def make(person=None, workflows=("test-orders",)):
        _, plaintext = token_create(name=f"t{next(made)}", workflows=list(workflows),
                                    acting_user=people[person] if person else None)
        return {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}

    return make


def _start(client, headers, **body):
    return client.post("/api/bulk", body, content_type="application/json", **headers)


def _failed_run(workflow="test-orders"):
    return place(new_run(workflow), status=RunStatus.ATTENTION,
                 step_statuses={"create-task": StepStatus.FAILED})


def test_a_bulk_job_started_over_the_api_acts_once_per_run_and_reports_progress(
        client, bearer, people, django_capture_on_commit_callbacks):
    failed = [_failed_run() for _ in range(3)]
    untouched = new_run()  # queued: not matched by the filter
    elsewhere = place(new_run("test-saga"), status=RunStatus.ATTENTION)
    headers = bearer("olga")
    with django_capture_on_commit_callbacks() as hints:
        response = _start(client, headers, action="resume", reason="tracker back up",
                          filters={"status": "attention"})
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["status"] == "running" and body["total"] == 3 and body["handled"] == 0
    assert len(hints) == 1  # the wake-up hint for a worker, after commit

    run_bulk_job(body["id"])  # what the worker the hint wakes does
    progress = client.get(f"/api/bulk/{body['id']}", **headers)
    assert progress.status_code == 200
    done = progress.json()
    assert done["status"] == "done" and done["handled"] == 3
    assert done["outcomes"] == {"done": 3} and done["approval_request_id"] is None
    for run in failed:
        assert Run.objects.get(pk=run.pk).status == RunStatus.QUEUED
        records = AuditRecord.objects.filter(run=run, action="resumed")
        assert records.count() == 1
        assert records.get().actor_label.startswith("olga")
    assert Run.objects.get(pk=untouched.pk).status == RunStatus.QUEUED
    assert not AuditRecord.objects.filter(run=untouched, action="resumed").exists()
    assert Run.objects.get(pk=elsewhere.pk).status == RunStatus.ATTENTION


def test_cancel_stops_a_job_and_only_its_person_sees_it(client, bearer):
    _failed_run()
    olga = bearer("olga")
    job = _start(client, olga, action="resume", reason="go").json()
    assert client.get(f"/api/bulk/{job['id']}", **bearer("carl")).status_code == 404
    assert client.post(f"/api/bulk/{job['id']}/cancel", **bearer("carl")).status_code == 404
    cancelled = client.post(f"/api/bulk/{job['id']}/cancel", **olga)
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    run_bulk_job(job["id"])
    assert client.get(f"/api/bulk/{job['id']}", **olga).json()["handled"] == 0
    again = client.post(f"/api/bulk/{job['id']}/cancel", **olga)
    assert again.status_code == 409 and again.json()["error"] == "finished"


def test_a_superusers_token_follows_any_job_on_its_workflows_as_the_console_does(
        client, bearer, people):
    _failed_run()
    job = _start(client, bearer("olga"), action="resume", reason="go").json()
    people["root"] = User.objects.create_superuser("root")
    assert client.get(f"/api/bulk/{job['id']}", **bearer("root")).status_code == 200
    # Not through a token for other workflows: the job is about runs outside its reach.
    assert client.get(f"/api/bulk/{job['id']}",
                      **bearer("root", workflows=("test-saga",))).status_code == 404
    assert client.post(f"/api/bulk/{job['id']}/cancel",
                       **bearer("olga", workflows=("test-saga",))).status_code == 404
    cancelled = client.post(f"/api/bulk/{job['id']}/cancel", **bearer("root"))
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert BulkJob.objects.get(pk=job["id"]).cancelled_by == people["root"]


def test_refusals_are_clear_and_write_nothing(client, bearer):
    _failed_run()
    nobody = _start(client, bearer(None), action="resume", reason="go")
    assert nobody.status_code == 403 and nobody.json()["error"] == "no_acting_user"
    two = bearer("olga", workflows=("test-orders", "test-saga"))
    unnamed = _start(client, two, action="resume", reason="go")
    assert unnamed.status_code == 400 and "test-orders, test-saga" in unnamed.json()["detail"]
    foreign = _start(client, bearer("olga"), action="resume", reason="go",
                     filters={"workflow": "test-saga"})
    assert foreign.status_code == 400
    blank = _start(client, bearer("olga"), action="resume", reason="")
    assert blank.status_code == 422
    call = _start(client, bearer("olga"), action="retry_tool_call", reason="go")
    assert call.status_code == 422
    assert not BulkJob.objects.exists()


def test_a_bulk_rerun_from_a_step_waits_for_a_second_person_and_then_reruns_that_step(
        client, bearer, people, script):
    runs = [new_run() for _ in range(2)]
    for run in runs:
        assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    keys = {run.pk: run.steps.get(name="post-ledger").idempotency_key for run in runs}
    job = _start(client, bearer("olga"), action="rerun_from_step", reason="ledger lost them",
                 step="post-ledger", filters={"status": "completed"}).json()
    run_bulk_job(job["id"])
    progress = client.get(f"/api/bulk/{job['id']}", **bearer("olga")).json()
    assert progress["outcomes"] == {"second_person": 2}
    assert progress["approval_request_id"] is not None
    decide(progress["approval_request_id"], user=people["carl"], approved=True,
           decision_id=uuid.uuid4())
    run_bulk_job(job["id"])  # the job's worker applies the approval
    for run in runs:
        run.refresh_from_db()
        assert run.status == RunStatus.QUEUED and run.generation == 1
        ledger = run.steps.get(name="post-ledger")
        assert ledger.status == StepStatus.PENDING and ledger.idempotency_key != keys[run.pk]
        assert run.steps.get(name="create-task").generation == 0
        assert AuditRecord.objects.filter(run=run, action="rerun_from_step").count() == 1


@pytest.mark.parametrize(("body", "where"), [
    ({"filters": {"stauts": "attention"}}, ["filters", "stauts"]),
    ({"filters": "attention"}, ["filters"]),
    ({"filter": {"status": "attention"}}, ["filter"]),
])
def test_a_filter_it_does_not_know_is_refused_never_read_as_every_run(client, bearer, body,
                                                                        where):
    # Read as no filter, a misspelt one would have the job cancel every run it may see.
    _failed_run(), new_run()
    refused = _start(client, bearer("olga"), action="cancel", reason="vendor incident", **body)
    assert refused.status_code == 422, refused.content
    assert where in [e["loc"] for e in refused.json()["errors"]]
    assert not BulkJob.objects.exists()
